#!/usr/bin/env bash
# Rebuilds ../static/editor.js from the locked packages (package-lock.json), offline once installed:
# npm ci, then esbuild bundles src/editor.mjs and CodeMirror into one minified file (licences at its end).
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm run build
