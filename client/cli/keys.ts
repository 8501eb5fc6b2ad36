// `ptybroker keys`: the tenant's API keys over /v1/keys (list, create, revoke), with a key that
// has every scope.
import { parseArgs } from "node:util";
import { KEY_SCOPES, type KeyInfo, type KeyScope } from "../index.js";
import { broker, one, UsageError } from "./common.js";

export async function keys(args: string[]): Promise<number> {
  const [action, ...rest] = args;
  if (action === "list" || action === undefined) return list(rest);
  if (action === "create") return create(rest);
  if (action === "revoke") return revoke(rest);
  throw new UsageError(`keys takes list, create or revoke, got ${JSON.stringify(action)}`);
}

async function list(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { json: { type: "boolean" } } });
  if (positionals.length) throw new UsageError("keys list takes no arguments");
  const all = await broker().keys.list();
  process.stdout.write(values.json ? `${JSON.stringify(all, null, 2)}\n` : table(all));
  return 0;
}

async function create(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { scope: { type: "string", multiple: true }, expires: { type: "string" }, json: { type: "boolean" } },
  });
  const name = one(positionals, "key name");
  const scopes = values.scope?.flatMap((s) => s.split(",")).filter(Boolean);
  for (const scope of scopes ?? []) {
    if (!KEY_SCOPES.includes(scope as KeyScope)) throw new UsageError(`--scope is one of ${KEY_SCOPES.join(", ")}`);
  }
  const made = await broker().keys.create(name, {
    ...(scopes?.length ? { scopes: scopes as KeyScope[] } : {}),
    ...(values.expires !== undefined ? { expiresAt: values.expires } : {}),
  });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(made, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(`${made.key}\n`);
  process.stderr.write(`key ${made.keyId} (${made.scopes.join(" ")}${made.expiresAt ? `, until ${made.expiresAt}` : ""}): shown this once\n`);
  return 0;
}

async function revoke(args: string[]): Promise<number> {
  const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
  const keyId = one(positionals, "key id");
  await broker().keys.revoke(keyId);
  process.stdout.write(`${keyId}: revoked\n`);
  return 0;
}

function table(all: KeyInfo[]): string {
  const when = (at: string | null) => (at ? at.replace("T", " ").replace(/\.\d+Z$/, "Z") : "-");
  const rows = all.map((k) => [k.keyId, k.name, k.scopes.join(","), when(k.createdAt), when(k.lastUsedAt), when(k.expiresAt)]);
  const header = ["ID", "NAME", "SCOPES", "CREATED", "LAST USED", "EXPIRES"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [header, ...rows].map((r) => `${r.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd()}\n`).join("");
}
