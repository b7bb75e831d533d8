// SPDX-License-Identifier: MIT
// Validates deploy/kubernetes/*.yaml offline:
//   - every built-in object (apps/v1, v1, policy/v1, rbac/v1) against the Kubernetes OpenAPI
//     schemas compiled into the npm package kubernetes-models, and the HTTPRoute against
//     @kubernetes-models/gateway-api (both pinned in tests/oracle/package.json). These schemas,
//     like the upstream OpenAPI ones, do not reject unknown fields (no additionalProperties:
//     false), so a misspelt optional field passes them; types, enums, required fields and formats
//     are checked.
//   - the InferencePool (GIE v1: no packaged schema exists, neither in Debian nor on npm) and the
//     EndpointPickerConfig in the EPP's ConfigMap by the structural rules written out below.
//   - cross references: Service and InferencePool selectors match the pod labels, named ports
//     exist, the pool's endpointPickerRef names the EPP Service and port, the HTTPRoute's backend
//     is the pool, every `glint serve` flag in the Deployment is one `glint serve --help` lists.
//   - the image: the Deployment runs the name `make image` tags (scripts/image.sh --name), with
//     pull policy IfNotPresent, the model on a volume at the Containerfile's VOLUME and the
//     Containerfile's USER as runAsUser.
// Prints one line per check; exits 1 on any failure.
//   node tests/deploy/k8s_validate.mjs [--glint build/glint] [FILE.yaml ...]
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT, parseArgs } from "../server/lib.mjs";

const a = parseArgs(process.argv.slice(2));
const oracle = path.join(ROOT, "tests/oracle/node_modules");
const requireOracle = createRequire(path.join(ROOT, "tests/oracle/package.json"));
const YAML = requireOracle("yaml");
const files = a._.length ? a._.map((f) => path.resolve(f)) : fs.readdirSync(path.join(ROOT, "deploy/kubernetes")).filter((f) => f.endsWith(".yaml")).sort().map((f) => path.join(ROOT, "deploy/kubernetes", f));
const failures = [];
const check = (ok, what) => {
    console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
    if (!ok) failures.push(what);
};

// apiVersion/kind -> module path of the kubernetes-models class.
function modelPath(apiVersion, kind) {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    if (group === "gateway.networking.k8s.io") return path.join(oracle, "@kubernetes-models/gateway-api", group, version, `${kind}.js`);
    const dir = group === "" ? "v1" : path.join(group === "apps" || group === "policy" || group === "batch" || group === "autoscaling" ? group : group, version);
    return path.join(oracle, "kubernetes-models", group === "" ? "v1" : dir, `${kind}.js`);
}

async function validateBuiltin(doc, where) {
    const p = modelPath(doc.apiVersion, doc.kind);
    if (!fs.existsSync(p)) return check(false, `${where}: no packaged schema for ${doc.apiVersion} ${doc.kind} (${path.relative(ROOT, p)})`);
    const mod = await import(pathToFileURL(p).href);
    const Model = mod[doc.kind] ?? mod.default;
    try {
        new Model(doc).validate();
        check(true, `${where}: valid against the ${doc.apiVersion} ${doc.kind} schema (${path.relative(oracle, p).split(path.sep)[0]})`);
    } catch (e) {
        check(false, `${where}: ${doc.apiVersion} ${doc.kind} schema: ${String(e.message).slice(0, 400)}`);
    }
}

// ---- structural rules for the GIE objects (api/v1/inferencepool_types.go of the GIE repo) ----
const DNS1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const isPort = (n) => Number.isInteger(n) && n >= 1 && n <= 65535;
function inferencePoolProblems(d) {
    const p = [];
    const known = (obj, keys, at) => {
        for (const k of Object.keys(obj ?? {})) if (!keys.includes(k)) p.push(`unknown field ${at}.${k}`);
    };
    known(d, ["apiVersion", "kind", "metadata", "spec"], "");
    if (!DNS1123.test(d.metadata?.name ?? "")) p.push("metadata.name must be a DNS-1123 label");
    const s = d.spec ?? {};
    known(s, ["selector", "targetPorts", "endpointPickerRef"], "spec");
    const ml = s.selector?.matchLabels;
    known(s.selector, ["matchLabels"], "spec.selector");
    if (!ml || typeof ml !== "object" || !Object.keys(ml).length) p.push("spec.selector.matchLabels: required, non-empty");
    else for (const [k, v] of Object.entries(ml)) if (typeof v !== "string") p.push(`spec.selector.matchLabels.${k}: must be a string`);
    if (!Array.isArray(s.targetPorts) || s.targetPorts.length !== 1) p.push("spec.targetPorts: exactly one port");
    else if (!isPort(s.targetPorts[0]?.number)) p.push("spec.targetPorts[0].number: integer 1..65535");
    const e = s.endpointPickerRef;
    if (!e) p.push("spec.endpointPickerRef: required");
    else {
        known(e, ["group", "kind", "name", "port", "failureMode"], "spec.endpointPickerRef");
        if (!DNS1123.test(e.name ?? "")) p.push("spec.endpointPickerRef.name: DNS-1123 label required");
        if ((e.kind ?? "Service") === "Service" && !isPort(e.port?.number)) p.push("spec.endpointPickerRef.port.number: required for a Service, 1..65535");
        if (e.failureMode !== undefined && !["FailOpen", "FailClose"].includes(e.failureMode)) p.push("spec.endpointPickerRef.failureMode: FailOpen|FailClose");
    }
    return p;
}
function pickerConfigProblems(text) {
    const p = [];
    let c;
    try {
        c = YAML.parse(text);
    } catch (err) {
        return [`not YAML: ${err.message}`];
    }
    if (c?.apiVersion !== "inference.networking.x-k8s.io/v1alpha1" || c?.kind !== "EndpointPickerConfig") p.push("apiVersion/kind must be inference.networking.x-k8s.io/v1alpha1 EndpointPickerConfig");
    const names = new Set();
    for (const pl of c?.plugins ?? []) {
        if (typeof pl?.type !== "string") p.push("a plugin without a type");
        names.add(pl.name ?? pl.type);
    }
    if (!c?.schedulingProfiles?.length) p.push("no schedulingProfiles");
    for (const prof of c?.schedulingProfiles ?? [])
        for (const r of prof.plugins ?? []) if (!names.has(r.pluginRef)) p.push(`profile ${prof.name}: pluginRef ${r.pluginRef} names no plugin`);
    if (![...names].some((n) => /picker$/.test(n))) p.push("no picker plugin");
    if (![...names].some((n) => /profile-handler$/.test(n))) p.push("no profile handler plugin");
    return p;
}

const matches = (selector, labels) => Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);

async function main() {
    const docs = [];
    for (const f of files) {
        const all = YAML.parseAllDocuments(fs.readFileSync(f, "utf8"));
        all.forEach((d, i) => {
            if (d.errors.length) return check(false, `${path.relative(ROOT, f)} document ${i + 1}: YAML: ${d.errors[0].message}`);
            const j = d.toJSON();
            if (j) docs.push({ doc: j, where: `${path.relative(ROOT, f)} ${j.kind ?? "?"}/${j.metadata?.name ?? "?"}` });
        });
    }
    check(docs.length > 0, `${docs.length} objects in ${files.map((f) => path.relative(ROOT, f)).join(", ")}`);
    for (const { doc, where } of docs) {
        if (doc.kind === "InferencePool") {
            const p = doc.apiVersion === "inference.networking.k8s.io/v1" ? inferencePoolProblems(doc) : [`apiVersion ${doc.apiVersion}: expected inference.networking.k8s.io/v1`];
            check(p.length === 0, `${where}: InferencePool structure (GIE v1 rules) ${p.join("; ")}`);
        } else await validateBuiltin(doc, where);
    }
    // ---- cross references ----
    const of = (kind, name) => docs.find((d) => d.doc.kind === kind && (!name || d.doc.metadata?.name === name))?.doc;
    const pool = of("InferencePool");
    const deployments = docs.filter((d) => d.doc.kind === "Deployment").map((d) => d.doc);
    for (const svc of docs.filter((d) => d.doc.kind === "Service").map((d) => d.doc)) {
        const dep = deployments.find((d) => matches(svc.spec.selector, d.spec.template.metadata.labels));
        check(!!dep, `Service/${svc.metadata.name}: its selector matches the pods of a Deployment (${dep?.metadata.name})`);
        const portNames = new Set(dep?.spec.template.spec.containers.flatMap((c) => (c.ports ?? []).map((p) => p.name)) ?? []);
        for (const p of svc.spec.ports) check(typeof p.targetPort !== "string" || portNames.has(p.targetPort), `Service/${svc.metadata.name} port ${p.name}: targetPort ${p.targetPort} is a container port name`);
    }
    for (const dep of deployments) {
        check(matches(dep.spec.selector.matchLabels, dep.spec.template.metadata.labels), `Deployment/${dep.metadata.name}: selector matches its template's labels`);
        for (const c of dep.spec.template.spec.containers) {
            const names = new Set((c.ports ?? []).map((p) => p.name));
            for (const [k, pr] of Object.entries({ startup: c.startupProbe, readiness: c.readinessProbe, liveness: c.livenessProbe }))
                if (pr?.httpGet) check(typeof pr.httpGet.port !== "string" || names.has(pr.httpGet.port), `Deployment/${dep.metadata.name} ${k} probe: port ${pr.httpGet.port} is a container port name`);
            const cm = (dep.spec.template.spec.volumes ?? []).map((v) => v.configMap?.name).filter(Boolean);
            for (const n of cm) check(!!of("ConfigMap", n), `Deployment/${dep.metadata.name}: ConfigMap ${n} is defined`);
        }
    }
    const glintDep = deployments.find((d) => d.spec.template.spec.containers.some((c) => (c.command ?? [])[0] === "glint"));
    if (pool) {
        check(!!glintDep && matches(pool.spec.selector.matchLabels, glintDep.spec.template.metadata.labels), `InferencePool/${pool.metadata.name}: selector matches the glint pods`);
        const gport = glintDep?.spec.template.spec.containers.flatMap((c) => c.ports ?? []).find((p) => p.containerPort === pool.spec.targetPorts[0].number);
        check(!!gport, `InferencePool/${pool.metadata.name}: targetPort ${pool.spec.targetPorts[0].number} is a glint container port`);
        const epp = of("Service", pool.spec.endpointPickerRef?.name);
        check(!!epp && epp.spec.ports.some((p) => p.port === pool.spec.endpointPickerRef.port?.number), `InferencePool/${pool.metadata.name}: endpointPickerRef is Service ${pool.spec.endpointPickerRef?.name} port ${pool.spec.endpointPickerRef?.port?.number}`);
        const route = of("HTTPRoute");
        check(!!route && route.spec.rules.some((r) => (r.backendRefs ?? []).some((b) => b.kind === "InferencePool" && b.group === "inference.networking.k8s.io" && b.name === pool.metadata.name)), `HTTPRoute/${route?.metadata.name}: a backendRef is InferencePool ${pool.metadata.name}`);
        for (const cmap of docs.filter((d) => d.doc.kind === "ConfigMap").map((d) => d.doc))
            for (const [k, v] of Object.entries(cmap.data ?? {}))
                if (/kind:\s*EndpointPickerConfig/.test(v)) {
                    const p = pickerConfigProblems(v);
                    check(p.length === 0, `ConfigMap/${cmap.metadata.name} ${k}: EndpointPickerConfig structure ${p.join("; ")}`);
                }
    }
    // ---- the image: the one `make image` builds, as the Containerfile makes it ----
    if (glintDep) {
        const c = glintDep.spec.template.spec.containers.find((x) => (x.command ?? [])[0] === "glint");
        const built = spawnSync("bash", [path.join(ROOT, "scripts/image.sh"), "--name"], { encoding: "utf8" }).stdout.trim();
        check(!!built && c.image === built, `Deployment/${glintDep.metadata.name}: image ${c.image} is what make image tags (scripts/image.sh --name: ${built})`);
        check(c.imagePullPolicy === "IfNotPresent", `Deployment/${glintDep.metadata.name}: imagePullPolicy ${c.imagePullPolicy} (IfNotPresent: a locally loaded image is used)`);
        const cf = fs.readFileSync(path.join(ROOT, "Containerfile"), "utf8");
        const volume = /^VOLUME\s+(\S+)/m.exec(cf)?.[1];
        const user = /^USER\s+(\d+)/m.exec(cf)?.[1];
        const mounts = (c.volumeMounts ?? []).map((m) => m.mountPath);
        const model = c.args[c.args.indexOf("--model") + 1] ?? "";
        check(!!volume && mounts.includes(volume) && model.startsWith(`${volume}/`), `Deployment/${glintDep.metadata.name}: the model ${model} is on a volume mounted at the image's VOLUME ${volume}`);
        const sc = c.securityContext ?? {};
        check(sc.runAsNonRoot === true && String(sc.runAsUser) === user, `Deployment/${glintDep.metadata.name}: runAsUser ${sc.runAsUser} is the image's USER ${user}, runAsNonRoot`);
    }
    // ---- glint serve flags against the binary's own --help ----
    const bin = path.resolve(ROOT, String(a.glint ?? process.env.GLINT_BIN ?? "build/glint"));
    if (glintDep && fs.existsSync(bin)) {
        const help = spawnSync(bin, ["serve", "--help"], { encoding: "utf8" });
        const text = `${help.stdout}${help.stderr}`;
        const args = glintDep.spec.template.spec.containers.find((c) => (c.command ?? [])[0] === "glint").args;
        const flags = args.filter((x) => /^--[a-z]/.test(x));
        const unknown = flags.filter((f) => !new RegExp(`(^|\\s|/ )${f.replace(/[-]/g, "\\-")}(\\s|$)`, "m").test(text));
        check(args[0] === "serve" && unknown.length === 0, `Deployment/${glintDep.metadata.name}: every flag (${flags.length}) is listed by '${path.relative(ROOT, bin)} serve --help'${unknown.length ? `; unknown: ${unknown.join(" ")}` : ""}`);
    } else console.log(`skip glint serve flags: ${bin} not built`);
    console.log(`k8s manifests: ${failures.length ? `FAILED (${failures.length})` : "OK"}`);
    process.exit(failures.length ? 1 : 0);
}

main().catch((e) => {
    console.error(`FAIL k8s_validate: ${e?.stack ?? e}`);
    process.exit(1);
});
