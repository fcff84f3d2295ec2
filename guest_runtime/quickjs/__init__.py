"""JavaScript and TypeScript cells: the QuickJS engine, its guest prelude and the TypeScript stripper."""
