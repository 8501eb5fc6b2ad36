// Structured event logs: one JSON line per event, `log.warn("link.frame", { sessionId, outcome })`.
// Only `console`, so it runs unchanged in workerd, Node and browsers.

// shared/ compiles without platform typings; every runtime it runs in has a console.
const out = (globalThis as unknown as { console: { log(line: string): void; error(line: string): void } }).console;

export type LogFields = Record<string, unknown>;
type Level = "debug" | "info" | "warn" | "error";

const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };
let threshold: Level = "info";

export function setLogLevel(level: string | undefined): void {
  if (level && level in ORDER) threshold = level as Level;
}

function emit(level: Level, event: string, fields: LogFields = {}): void {
  if (ORDER[level] < ORDER[threshold]) return;
  const line = JSON.stringify({ level, event, ...fields, ...errorFields(fields.error) });
  if (level === "error" || level === "warn") out.error(line);
  else out.log(line);
}

function errorFields(error: unknown): LogFields {
  return error instanceof Error ? { error: error.message } : {};
}

export const log = {
  debug: (event: string, fields?: LogFields) => emit("debug", event, fields),
  info: (event: string, fields?: LogFields) => emit("info", event, fields),
  warn: (event: string, fields?: LogFields) => emit("warn", event, fields),
  error: (event: string, fields?: LogFields) => emit("error", event, fields),
};
