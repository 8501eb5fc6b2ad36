// `npm run pack:client`: the SDK (`ptybroker`, also `ptybroker/client`) and the CLI (`ptybroker`) as
// an npm package, packed into dist/pack/. Its last line of stdout is the tarball's absolute path:
//
//   npm install "$(npm run -s pack:client | tail -n 1)"
//
// The package holds built JavaScript and `.d.ts` types and depends on `ws` alone (Node needs it;
// the SDK loads it only where there is no global WebSocket, so browsers never do):
//   dist/client.js   the SDK, ESM for Node 20 and for bundlers (browsers). eventsource-parser is
//                    bundled in (8 kB of pure JS rather than one more dependency); nothing of zod
//                    is: see `pureZod` below.
//   dist/cli.js      the CLI (the package's bin), for Node 20: the same SDK code bundled in, and
//                    hono's JWT helpers (`runner-credential` signs with them).
//   dist/types/      declarations from tsc, cut down to what `ptybroker/client` exports (see
//                    `shakeDeclarations`), so they import no package at all: they compile in a
//                    consumer's project with `strict`, `exactOptionalPropertyTypes` and
//                    `skipLibCheck: false`, with nothing else installed.
//   dist/licenses/   the licences of the code bundled in.
// Nothing of the server (wrangler, workerd, node-pty, ioredis, hono's server) is in it or
// installed with it; the build fails if anything but what is listed here ends up in a bundle.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { build, type BuildOptions, type Metafile, type Plugin } from "esbuild";
import ts from "typescript";
import { ROOT } from "./stack.js";

const OUT = join(ROOT, "dist/pack");
const STAGE = join(OUT, "ptybroker");
/** Packages whose code may be bundled into the package's JavaScript (each is MIT-licensed). */
const BUNDLED = ["eventsource-parser", "hono"];
/** The package's dependencies: loaded at run time, never bundled. */
const DEPENDENCIES = ["ws"];

const root = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  version: string;
  engines: Record<string, string>;
  dependencies: Record<string, string>;
};

const started = performance.now();
rmSync(STAGE, { recursive: true, force: true });
mkdirSync(STAGE, { recursive: true });
for (const old of readdirSync(OUT)) if (/^ptybroker-.*\.tgz$/.test(old)) rmSync(join(OUT, old));

// ---- JavaScript ----

/**
 * shared/protocol.ts builds its zod schemas at module level; the SDK uses none of them (only the
 * frame codec and types next to them), but a bundler must keep a call it cannot prove pure, and
 * with it all of zod (750 kB). Every call on `z` in a shared/ module that imports zod is marked
 * `@__PURE__` here (a zod schema's construction has no side effects), so an unused schema goes
 * and zod with it. Found by the syntax tree, not by text, so comments and strings are left alone.
 */
const pureZod: Plugin = {
  name: "pure-zod",
  setup(builder) {
    builder.onLoad({ filter: /[\\/]shared[\\/][^\\/]+\.ts$/ }, (args) => {
      const text = readFileSync(args.path, "utf8");
      if (!/from "zod"/.test(text)) return undefined;
      const source = ts.createSourceFile(args.path, text, ts.ScriptTarget.Latest, true);
      const starts = new Set<number>();
      const visit = (node: ts.Node): void => {
        if (ts.isCallExpression(node) && chainRoot(node.expression)?.text === "z") starts.add(node.getStart(source));
        ts.forEachChild(node, visit);
      };
      visit(source);
      let out = text;
      for (const at of [...starts].sort((a, b) => b - a)) out = `${out.slice(0, at)}/* @__PURE__ */ ${out.slice(at)}`;
      return { contents: out, loader: "ts" };
    });
  },
};

/** `z` for `z.a().b(c).d`: the identifier a chain of calls and property reads starts from. */
function chainRoot(node: ts.Expression): ts.Identifier | undefined {
  while (ts.isPropertyAccessExpression(node) || ts.isCallExpression(node)) node = node.expression;
  return ts.isIdentifier(node) ? node : undefined;
}

const common = {
  bundle: true,
  format: "esm",
  target: "es2022",
  external: DEPENDENCIES,
  // A global's property read counts as a possible side effect; this one is a constant.
  define: { "Number.MAX_SAFE_INTEGER": String(Number.MAX_SAFE_INTEGER) },
  plugins: [pureZod],
  logLevel: "warning",
  legalComments: "inline",
} satisfies BuildOptions;

const [sdk, cli] = await Promise.all([
  build({
    ...common,
    entryPoints: [join(ROOT, "client/index.ts")],
    outfile: join(STAGE, "dist/client.js"),
    metafile: true,
    // Node 20 and bundlers for browsers alike: no Node built-ins, and `ws` only where needed.
    platform: "neutral",
    mainFields: ["module", "main"],
    banner: { js: `// ptybroker/client ${root.version}: the SDK, built from client/ by scripts/pack-client.ts` },
  }),
  build({
    ...common,
    entryPoints: [join(ROOT, "client/cli/main.ts")],
    outfile: join(STAGE, "dist/cli.js"),
    metafile: true,
    platform: "node",
    target: "node20",
    banner: { js: `#!/usr/bin/env node\n// ptybroker ${root.version}: the CLI, built from client/cli/main.ts by scripts/pack-client.ts` },
  }),
]);
const sdkPackages = checkInputs(sdk.metafile, "dist/client.js");
const cliPackages = checkInputs(cli.metafile, "dist/cli.js");
const bundledPackages = new Set([...sdkPackages, ...cliPackages]);

/** The packages a bundle took code from; throws if any is not in BUNDLED. */
function checkInputs(metafile: Metafile, what: string): string[] {
  const packages = new Set<string>();
  // What was read but shaken out (zod's modules, say) is in metafile.inputs; only what the
  // output holds counts.
  const inputs = Object.values(metafile.outputs).flatMap((output) =>
    Object.entries(output.inputs).flatMap(([input, { bytesInOutput }]) => (bytesInOutput > 0 ? [input] : [])),
  );
  for (const input of inputs) {
    const match = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
    if (match) packages.add(match[1]);
  }
  const unexpected = [...packages].filter((name) => !BUNDLED.includes(name));
  if (unexpected.length) {
    throw new Error(`${what} bundles ${unexpected.join(", ")}: only ${BUNDLED.join(", ")} may be bundled (scripts/pack-client.ts)`);
  }
  return [...packages];
}

// ---- Types ----

const TYPES = join(STAGE, "dist/types");
const declarations = emitDeclarations(join(ROOT, "client/index.ts"));
const entryDeclaration = join(TYPES, "client/index.d.ts");
for (const [file, text] of shakeDeclarations(declarations, entryDeclaration)) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

/** tsc's declarations for `entry` and what it imports (client/tsconfig.json's options), in memory. */
function emitDeclarations(entry: string): Map<string, string> {
  const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, "client/tsconfig.json"), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
    },
  });
  if (!config) throw new Error("client/tsconfig.json could not be read");
  const program = ts.createProgram([entry], {
    ...config.options,
    noEmit: false,
    declaration: true,
    emitDeclarationOnly: true,
    rootDir: ROOT,
    outDir: TYPES,
  });
  const files = new Map<string, string>();
  const result = program.emit(undefined, (file, text) => files.set(resolve(file), text));
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...result.diagnostics];
  if (diagnostics.length) {
    throw new Error(
      ts.formatDiagnostics(diagnostics, {
        getCanonicalFileName: (f) => f,
        getCurrentDirectory: () => ROOT,
        getNewLine: () => "\n",
      }),
    );
  }
  return files;
}

/**
 * Keeps of the declaration files only what the entry's exports need, following names through
 * imports: shared/protocol.d.ts, say, keeps `ExitInfo` and drops the zod schemas next to it, and
 * with them its `import { z } from "zod"`. Every top-level statement of the entry is kept; of
 * another file, the declarations of the names asked of it, then of the names those mention.
 * Fails if what is left still imports a package.
 */
function shakeDeclarations(files: Map<string, string>, entry: string): Map<string, string> {
  const sources = new Map([...files].map(([file, text]) => [file, ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)]));
  const wanted = new Map<string, Set<string>>();
  const keptStatements = new Map<string, Set<ts.Statement>>();
  const keptImports = new Map<string, Set<ts.Node>>();
  const queue: string[] = [entry];
  wanted.set(entry, new Set());

  const target = (from: string, specifier: string): string | undefined =>
    specifier.startsWith(".") ? resolve(dirname(from), specifier.replace(/\.js$/, ".d.ts")) : undefined;
  const want = (file: string, name: string) => {
    const set = wanted.get(file) ?? new Set<string>();
    wanted.set(file, set);
    if (!set.has(name)) {
      set.add(name);
      queue.push(file);
    }
  };

  const sourceOf = (file: string): ts.SourceFile => {
    const source = sources.get(file);
    if (!source) throw new Error(`declarations: ${relative(ROOT, file)} was not emitted`);
    return source;
  };
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    const source = sourceOf(file);
    const names = wanted.get(file) ?? new Set<string>();
    const statements = keptStatements.get(file) ?? new Set<ts.Statement>();
    keptStatements.set(file, statements);
    const imports = keptImports.get(file) ?? new Set<ts.Node>();
    keptImports.set(file, imports);
    // What this file declares and imports, by local name.
    const declared = new Map<string, ts.Statement[]>();
    const imported = new Map<string, { node: ts.Node; module: string; name: string }>();
    for (const statement of source.statements) {
      for (const name of declaredNames(statement)) declared.set(name, [...(declared.get(name) ?? []), statement]);
      if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier)) {
        const module = statement.moduleSpecifier.text;
        const clause = statement.importClause;
        if (clause?.name) imported.set(clause.name.text, { node: clause, module, name: "default" });
        const bindings = clause?.namedBindings;
        if (bindings && ts.isNamespaceImport(bindings)) imported.set(bindings.name.text, { node: bindings, module, name: "*" });
        if (bindings && ts.isNamedImports(bindings)) {
          for (const element of bindings.elements) {
            imported.set(element.name.text, { node: element, module, name: (element.propertyName ?? element.name).text });
          }
        }
      }
    }
    const keep = (statement: ts.Statement) => {
      if (statements.has(statement)) return;
      statements.add(statement);
      for (const name of referencedNames(statement)) use(name);
    };
    const use = (name: string) => {
      for (const statement of declared.get(name) ?? []) keep(statement);
      const from = imported.get(name);
      if (from && !imports.has(from.node)) {
        imports.add(from.node);
        const next = target(file, from.module);
        if (next && from.name !== "*") want(next, from.name);
        if (next && from.name === "*") for (const n of exportedNames(sourceOf(next))) want(next, n);
      }
    };
    for (const statement of source.statements) {
      if (ts.isImportDeclaration(statement)) continue;
      if (ts.isExportDeclaration(statement)) {
        // `export { a, b as c } from "./x.js"` (the entry's re-exports) or `export { a }` / `export {}`.
        const module = statement.moduleSpecifier && ts.isStringLiteral(statement.moduleSpecifier) ? statement.moduleSpecifier.text : undefined;
        const clause = statement.exportClause;
        const elements = clause && ts.isNamedExports(clause) ? clause.elements : undefined;
        if (!elements || elements.length === 0) {
          if (!module) statements.add(statement); // `export {};`: keeps the file a module
          else if (file === entry || names.size) {
            statements.add(statement); // `export * from`
            const next = target(file, module);
            if (next) for (const n of exportedNames(sourceOf(next))) want(next, n);
          }
          continue;
        }
        for (const element of elements) {
          if (file !== entry && !names.has(element.name.text)) continue;
          statements.add(statement);
          const local = (element.propertyName ?? element.name).text;
          const next = module ? target(file, module) : undefined;
          if (next) want(next, local);
          else if (!module) use(local);
        }
        continue;
      }
      if (file === entry) keep(statement);
    }
    for (const name of names) use(name);
  }

  const out = new Map<string, string>();
  for (const [file, statements] of keptStatements) {
    const source = sourceOf(file);
    const imports = keptImports.get(file) ?? new Set<ts.Node>();
    const parts: string[] = [];
    for (const statement of source.statements) {
      if (ts.isImportDeclaration(statement)) {
        const text = importText(source, statement, imports);
        if (text) parts.push(text);
      } else if (statements.has(statement)) parts.push(statement.getFullText(source));
    }
    for (const statement of source.statements) {
      if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) continue;
      if (statement.moduleSpecifier.text.startsWith(".") || !importText(source, statement, imports)) continue;
      throw new Error(
        `declarations: ${relative(TYPES, file)} still imports "${statement.moduleSpecifier.text}" after cutting to what ` +
          "ptybroker/client exports; the package's types must import no package",
      );
    }
    if (parts.length === 0) continue;
    out.set(file, `${parts.join("").trim()}\n`);
  }
  return out;
}

/** An import declaration with only the bindings in `used`, or undefined when none is. */
function importText(source: ts.SourceFile, statement: ts.ImportDeclaration, used: Set<ts.Node>): string | undefined {
  const clause = statement.importClause;
  if (!clause) return undefined;
  const parts: string[] = [];
  if (clause.name && used.has(clause)) parts.push(clause.name.text);
  const bindings = clause.namedBindings;
  if (bindings && ts.isNamespaceImport(bindings) && used.has(bindings)) parts.push(bindings.getText(source));
  if (bindings && ts.isNamedImports(bindings)) {
    const elements = bindings.elements.filter((element) => used.has(element)).map((element) => element.getText(source));
    if (elements.length) parts.push(`{ ${elements.join(", ")} }`);
  }
  if (parts.length === 0) return undefined;
  return `\nimport ${clause.isTypeOnly ? "type " : ""}${parts.join(", ")} from ${statement.moduleSpecifier.getText(source)};`;
}

/** The names a top-level statement declares. */
function declaredNames(statement: ts.Statement): string[] {
  if (ts.isVariableStatement(statement)) {
    return statement.declarationList.declarations.flatMap((d) => (ts.isIdentifier(d.name) ? [d.name.text] : []));
  }
  if (
    (ts.isInterfaceDeclaration(statement) ||
      ts.isTypeAliasDeclaration(statement) ||
      ts.isClassDeclaration(statement) ||
      ts.isFunctionDeclaration(statement) ||
      ts.isEnumDeclaration(statement) ||
      ts.isModuleDeclaration(statement)) &&
    statement.name &&
    ts.isIdentifier(statement.name)
  ) {
    return [statement.name.text];
  }
  return [];
}

/** The names a module exports (for `export *` and namespace imports: everything it declares). */
function exportedNames(source: ts.SourceFile): string[] {
  return source.statements.flatMap((statement) => {
    if (ts.isExportDeclaration(statement) && statement.exportClause && ts.isNamedExports(statement.exportClause)) {
      return statement.exportClause.elements.map((element) => (element.propertyName ?? element.name).text);
    }
    return declaredNames(statement);
  });
}

/**
 * Identifiers a declaration refers to: everything but the names of members, parameters and
 * the right-hand side of `a.b`. More than needed at worst (a type parameter that shadows a
 * top-level name keeps that name), never less.
 */
function referencedNames(statement: ts.Statement): Set<string> {
  const names = new Set<string>();
  const visit = (node: ts.Node): void => {
    if (ts.isIdentifier(node)) {
      const parent = node.parent;
      const isMemberName =
        (ts.isPropertySignature(parent) ||
          ts.isPropertyDeclaration(parent) ||
          ts.isMethodSignature(parent) ||
          ts.isMethodDeclaration(parent) ||
          ts.isGetAccessorDeclaration(parent) ||
          ts.isSetAccessorDeclaration(parent) ||
          ts.isParameter(parent) ||
          ts.isEnumMember(parent) ||
          ts.isNamedTupleMember(parent) ||
          ts.isPropertyAssignment(parent)) &&
        parent.name === node;
      const isRightHand =
        (ts.isQualifiedName(parent) && parent.right === node) || (ts.isPropertyAccessExpression(parent) && parent.name === node);
      if (!isMemberName && !isRightHand) names.add(node.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(statement);
  return names;
}

// ---- Manifest, readme, licences ----

const manifest = {
  name: "ptybroker",
  version: root.version,
  description: "Persistent remote terminals: the ptybroker SDK (ptybroker, or ptybroker/client) and CLI (ptybroker)",
  type: "module",
  engines: root.engines,
  // The SDK under the package's own name and under `ptybroker/client` (the same module). ESM only;
  // `require("ptybroker")` works where Node loads ESM with require (20.19 and later: engines).
  exports: {
    ".": { types: "./dist/types/client/index.d.ts", default: "./dist/client.js" },
    "./client": { types: "./dist/types/client/index.d.ts", default: "./dist/client.js" },
    "./package.json": "./package.json",
  },
  // For tools and TypeScript's older `node` module resolution, which do not read `exports`.
  main: "./dist/client.js",
  types: "./dist/types/client/index.d.ts",
  typesVersions: { "*": { client: ["./dist/types/client/index.d.ts"] } },
  bin: { ptybroker: "dist/cli.js" },
  files: ["dist"],
  sideEffects: false,
  dependencies: Object.fromEntries(DEPENDENCIES.map((name) => [name, root.dependencies[name]])),
};
writeFileSync(join(STAGE, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
copyFileSync(join(ROOT, "client/README.md"), join(STAGE, "README.md"));
mkdirSync(join(STAGE, "dist/licenses"), { recursive: true });
for (const name of [...bundledPackages].sort()) {
  copyFileSync(join(ROOT, "node_modules", name, "LICENSE"), join(STAGE, "dist/licenses", `${name.replace("/", "__")}.LICENSE`));
}

// ---- Pack ----

const [packed] = JSON.parse(
  execFileSync("npm", ["pack", "--json", "--pack-destination", OUT], { cwd: STAGE, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }),
) as { filename: string; size: number; unpackedSize: number; entryCount: number }[];
const tarball = join(OUT, packed.filename);
const kB = (bytes: number) => `${(bytes / 1000).toFixed(1)} kB`;
console.log(
  `pack:client: ${packed.filename}: ${kB(packed.size)} packed, ${kB(packed.unpackedSize)} unpacked, ${packed.entryCount} files; ` +
    `depends on ${DEPENDENCIES.map((name) => `${name} ${root.dependencies[name]}`).join(", ")}; ` +
    `the SDK bundles ${sdkPackages.sort().join(", ") || "nothing"}, the CLI ${cliPackages.sort().join(", ") || "nothing"}; ` +
    `${Math.round(performance.now() - started)} ms`,
);
console.log(tarball);
