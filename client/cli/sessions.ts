// Sessions by id or all of them: `ptybroker ls`, `kill`, `logs` and `share`.
import { parseArgs } from "node:util";
import type { Session, SessionStatus } from "../index.js";
import { broker, offset, one, UsageError, write } from "./common.js";

const STATUSES: SessionStatus[] = ["starting", "running", "exited", "lost", "failed"];

export async function ls(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { status: { type: "string" }, tag: { type: "string" }, json: { type: "boolean" } },
  });
  if (positionals.length) throw new UsageError("ls takes no arguments");
  const status = values.status as SessionStatus | undefined;
  if (status !== undefined && !STATUSES.includes(status)) {
    throw new UsageError(`--status is one of ${STATUSES.join(", ")}`);
  }
  const sessions = await broker().list({ status, tag: values.tag });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(sessions, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(table(sessions));
  return 0;
}

function table(sessions: Session[]): string {
  const rows = sessions.map((s) => [
    s.id,
    s.status === "exited" ? `exited (${s.exitCode ?? s.signal})` : s.status,
    s.reason ?? "",
    [s.command, ...s.args].join(" "),
    s.createdAt.replace("T", " ").replace(/\.\d+Z$/, "Z"),
    String(s.clients),
    s.label ?? "",
  ]);
  const header = ["ID", "STATUS", "REASON", "COMMAND", "CREATED", "CLIENTS", "LABEL"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [header, ...rows].map((r) => `${r.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd()}\n`).join("");
}

export async function kill(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { purge: { type: "boolean" } } });
  const id = one(positionals, "session id");
  const s = await broker().kill(id, { purge: values.purge });
  process.stdout.write(`${id}: ${s.status}${s.signal ? ` (${s.signal})` : s.exitCode !== null ? ` (exit ${s.exitCode})` : ""}\n`);
  return 0;
}

export async function logs(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { from: { type: "string" }, follow: { type: "boolean", short: "f" } },
  });
  const id = one(positionals, "session id");
  const b = broker();
  let cursor = offset(values.from);
  const end = (await b.get(id)).offset;
  for (;;) {
    const range = await b.output(id, { from: cursor });
    if (cursor !== undefined && range.from > cursor) {
      process.stderr.write(`[ptybroker: output before offset ${range.from} is no longer kept]\n`);
    }
    await write(range.bytes);
    cursor = range.to;
    if (range.to >= end || range.bytes.byteLength === 0) break;
  }
  if (!values.follow) return 0;
  const pty = await b.connect(id, { from: cursor });
  for await (const chunk of pty) await write(chunk);
  return 0;
}

export async function share(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { writer: { type: "boolean" }, ttl: { type: "string" } },
  });
  const id = one(positionals, "session id");
  const ttlSec = values.ttl === undefined ? undefined : Number(values.ttl);
  if (ttlSec !== undefined && !(Number.isInteger(ttlSec) && ttlSec > 0)) {
    throw new UsageError(`--ttl takes whole seconds, got ${JSON.stringify(values.ttl)}`);
  }
  const b = broker();
  const role = values.writer ? "writer" : "viewer";
  const { token, expiresAt } = await b.createToken(id, role, { ttlSec });
  process.stdout.write(`${b.url}/#session=${encodeURIComponent(id)}&token=${token}\n`);
  process.stderr.write(`a ${role} link, valid until ${expiresAt}\n`);
  return 0;
}
