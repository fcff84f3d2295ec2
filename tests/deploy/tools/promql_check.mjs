// Parses PromQL expressions with Prometheus's own grammar (@prometheus-io/lezer-promql).
// stdin: a JSON array of expressions; stdout: a JSON array, per expression null (it parses) or the
// first syntax error as {at, near}.  The grammar recovers from errors by inserting error nodes, so an
// expression parses only if its tree has none.
import { parser } from "@prometheus-io/lezer-promql";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const results = JSON.parse(input).map((expr) => {
  let problem = null;
  parser.parse(expr).iterate({
    enter(node) {
      if (problem === null && node.type.isError) {
        problem = { at: node.from, near: expr.slice(Math.max(0, node.from - 10), node.to + 10) };
      }
    },
  });
  return problem;
});
process.stdout.write(JSON.stringify(results));
