// SPDX-License-Identifier: MIT
// Judges `glint grammar sample` output with ajv 8 (draft 2020-12 dialect, ajv-formats, strict
// mode off so unknown keywords of real-world schemas are ignored as the spec says). "$schema" is
// dropped first: ajv's 2020 build does not load the older meta-schemas.
// usage: node grammar_validate.mjs MANIFEST   (lines: schema_path TAB docs_path TAB compact|ws:N)
// Exits 1 if any document is invalid; a schema ajv cannot compile is reported and skipped
// (python3-jsonschema still judges it).
import fs from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

let failed = 0, skipped = 0;
for (const line of fs.readFileSync(process.argv[2], "utf8").split("\n")) {
    if (!line.trim()) continue;
    const [schemaPath, docsPath, mode] = line.split("\t");
    const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8"));
    if (schema && typeof schema === "object") delete schema.$schema;
    const ajv = new Ajv2020({ strict: false, allErrors: false, logger: false });
    addFormats(ajv);
    let validate;
    try {
        validate = ajv.compile(schema);
    } catch (e) {
        skipped++;
        console.log(`${schemaPath.split("/").pop()} ${mode}: ajv cannot compile the schema (${e.message.slice(0, 120)}); skipped`);
        continue;
    }
    let n = 0, bad = 0;
    for (const raw of fs.readFileSync(docsPath, "utf8").split("\n")) {
        if (!raw || raw.startsWith('{"finished"')) continue;
        n++;
        let why = null;
        try {
            const text = mode === "compact" ? raw : JSON.parse(raw);
            const doc = JSON.parse(text);
            if (!validate(doc)) why = ajv.errorsText(validate.errors).slice(0, 200);
        } catch (e) {
            why = "not JSON: " + e.message;
        }
        if (why) {
            bad++;
            if (bad <= 3) console.log(`  INVALID ${schemaPath} [${mode}]: ${why}\n    ${raw.slice(0, 300)}`);
        }
    }
    console.log(`${schemaPath.split("/").pop().padEnd(60)} ${mode.padEnd(8)} ${String(n).padStart(3)} docs, ${bad} invalid`);
    failed += bad;
}
console.log(`ajv: ${failed} invalid documents, ${skipped} schemas skipped`);
process.exit(failed ? 1 : 0);
