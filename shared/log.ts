// Structured event logs: one JSON line per event, `log.warn("link.frame", { sessionId, outcome })`.
// Only `console`, so it runs unchanged in workerd, Node and browsers.

export type LogFields = Record<string, unknown>;
type Level = "debug" | "info" | "warn" | "error";
type ConsoleMethod = "log" | "warn" | "error";

// shared/ compiles without platform typings; every runtime it runs in has a console.
const out = (globalThis as unknown as { console: Record<ConsoleMethod, (line: string) => void> }).console;

const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };
let threshold: Level = "info";

/**
 * The console method each level is written with. Errors only go through `console.error`: under
 * `wrangler dev` (npm start, the tests' edge) it prints `✘ [ERROR]`, and a warning must not read
 * as one. `console.warn` prints `▲ [WARNING]` there, and it is still shown at wrangler's default
 * log level (`warn`), which hides `console.log`; in Node both go to stderr, so a runner's
 * warnings and errors stay on stderr, its debug and info lines on stdout.
 */
const CONSOLE_METHOD: Readonly<Record<Level, ConsoleMethod>> = { debug: "log", info: "log", warn: "warn", error: "error" };

export function setLogLevel(level: string | undefined): void {
  if (level && level in ORDER) threshold = level as Level;
}

function emit(level: Level, event: string, fields: LogFields = {}): void {
  if (ORDER[level] < ORDER[threshold]) return;
  const line = JSON.stringify({ level, event, ...fields, ...errorFields(fields.error) });
  out[CONSOLE_METHOD[level]](line);
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
