// `ptybroker webhooks` (list, create, delete, deliveries) over /v1/webhooks, with a key that
// carries `webhooks:write`; and `ptybroker audit`, a page of the audit log over /v1/audit, with a
// key that has every scope. Human tables, or `--json`.
import { parseArgs } from "node:util";
import { type AuditEntry, type TenantEventType, WEBHOOK_EVENTS, type WebhookDelivery, type WebhookInfo } from "../index.js";
import { broker, one, UsageError } from "./common.js";

export async function webhooks(args: string[]): Promise<number> {
  const [action, ...rest] = args;
  if (action === "list" || action === undefined) return list(rest);
  if (action === "create") return create(rest);
  if (action === "delete") return remove(rest);
  if (action === "deliveries") return deliveries(rest);
  throw new UsageError(`webhooks takes list, create, delete or deliveries, got ${JSON.stringify(action)}`);
}

const when = (at: string | null) => (at ? at.replace("T", " ").replace(/\.\d+Z$/, "Z") : "-");

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [header, ...rows].map((r) => `${r.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd()}\n`).join("");
}

function print(json: boolean | undefined, value: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : human());
}

async function list(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { json: { type: "boolean" } } });
  if (positionals.length) throw new UsageError("webhooks list takes no arguments");
  const all = await broker().webhooks.list();
  print(values.json, all, () => table(["ID", "URL", "EVENTS", "CREATED"], all.map((h: WebhookInfo) => [h.id, h.url, h.events.join(","), when(h.createdAt)])));
  return 0;
}

async function create(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { url: { type: "string" }, events: { type: "string" }, secret: { type: "string" }, json: { type: "boolean" } },
  });
  if (positionals.length) throw new UsageError("webhooks create takes --url URL [--events a,b] [--secret S]");
  if (!values.url) throw new UsageError("webhooks create needs --url URL");
  const events = values.events?.split(",").map((e) => e.trim()).filter(Boolean);
  for (const event of events ?? []) {
    if (!WEBHOOK_EVENTS.includes(event as TenantEventType)) throw new UsageError(`--events takes ${WEBHOOK_EVENTS.join(", ")}`);
  }
  const made = await broker().webhooks.create(values.url, {
    ...(events?.length ? { events: events as TenantEventType[] } : {}),
    ...(values.secret !== undefined ? { secret: values.secret } : {}),
  });
  if (values.json) {
    print(true, made, () => "");
    return 0;
  }
  process.stdout.write(`${made.secret}\n`);
  process.stderr.write(`webhook ${made.id} → ${made.url} (${made.events.join(" ")}): its signing secret is shown this once\n`);
  return 0;
}

async function remove(args: string[]): Promise<number> {
  const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
  const id = one(positionals, "webhook id");
  await broker().webhooks.delete(id);
  process.stdout.write(`${id}: deleted\n`);
  return 0;
}

async function deliveries(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { json: { type: "boolean" } } });
  const id = one(positionals, "webhook id");
  const all = await broker().webhooks.deliveries(id);
  print(values.json, all, () =>
    table(
      ["EVENT", "TYPE", "STATE", "ATTEMPTS", "LAST", "NEXT"],
      all.map((d: WebhookDelivery) => {
        const last = d.attempts[d.attempts.length - 1];
        const lastText = last ? `${last.status ?? last.error ?? "-"} in ${last.ms} ms` : (d.note ?? "-");
        return [d.eventId, d.type, d.state, String(d.attempts.length), lastText, when(d.nextAttemptAt)];
      }),
    ),
  );
  return 0;
}

export async function audit(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { after: { type: "string" }, limit: { type: "string" }, json: { type: "boolean" } },
  });
  if (positionals.length) throw new UsageError("audit takes [--after ID] [--limit N] [--json]");
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000)) throw new UsageError("--limit is 1 to 1000");
  if (values.after !== undefined && !/^\d{1,15}$/.test(values.after)) throw new UsageError("--after is an entry id");
  const page = await broker().audit.page({ ...(values.after !== undefined ? { after: values.after } : {}), ...(limit !== undefined ? { limit } : {}) });
  if (values.json) {
    print(true, page, () => "");
    return 0;
  }
  const detail = (e: AuditEntry) => (e.detail ? Object.entries(e.detail).map(([k, v]) => `${k}=${String(v)}`).join(" ") : "");
  process.stdout.write(
    table(
      ["ID", "AT", "ACTOR", "ACTION", "SESSION", "IP", "OUTCOME", "DETAIL"],
      page.entries.map((e) => [e.id, when(e.at), e.actor.role ? `${e.actor.id} (${e.actor.role})` : e.actor.id, e.action, e.sessionId ?? "-", e.ip ?? "-", e.outcome, detail(e)]),
    ),
  );
  if (page.nextCursor) process.stderr.write(`more: ptybroker audit --after ${page.nextCursor}\n`);
  return 0;
}
