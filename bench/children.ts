// Viewers in child processes of the bench (row 17's flooding viewer, row 3's viewers): people on
// other machines, whose decoding must not run on the thread that times or reads the others. A
// child is a bench module started with `fork` (tsx); it and the bench talk in typed IPC messages,
// each report having a `type`; a report `{type: "error", message}` fails whatever waits.
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";

export interface Child<Request, Report extends { type: string }> {
  readonly pid: number;
  send(request: Request): void;
  /** The next report of `type` (an `error` report, the child's exit or the deadline rejects). */
  next<T extends Report["type"]>(type: T, deadlineMs: number): Promise<Extract<Report, { type: T }>>;
  /** Resolves once the child has exited; `kill` ends it first (a child that has not finished). */
  exited(kill: boolean): Promise<void>;
}

/** Starts `module` (a path relative to bench/) with `args`. */
export function startChild<Request, Report extends { type: string }>(module: string, args: string[]): Child<Request, Report> {
  const child: ChildProcess = fork(fileURLToPath(new URL(module, import.meta.url)), args, {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    pid: child.pid ?? 0,
    send: (request) => child.send(request as object),
    next: <T extends Report["type"]>(type: T, deadlineMs: number) =>
      new Promise<Extract<Report, { type: T }>>((resolve, reject) => {
        const done = (outcome: () => void) => {
          clearTimeout(timer);
          child.off("message", onMessage);
          child.off("exit", onExit);
          outcome();
        };
        const timer = setTimeout(() => done(() => reject(new Error(`${module}: no ${type} in ${deadlineMs} ms`))), deadlineMs);
        const onMessage = (report: Report | { type: "error"; message: string }) => {
          if (report.type === "error" && "message" in report) done(() => reject(new Error(`${module}: ${report.message}`)));
          else if (report.type === type) done(() => resolve(report as Extract<Report, { type: T }>));
        };
        const onExit = (code: number | null) => done(() => reject(new Error(`${module} exited (${code}) before ${type}`)));
        child.on("message", onMessage);
        child.once("exit", onExit);
      }),
    async exited(kill) {
      const timer = setTimeout(() => child.kill("SIGKILL"), kill ? 0 : 10_000);
      await gone;
      clearTimeout(timer);
    },
  };
}

/** For a child: sends `report` to the bench. */
export function report(message: { type: string; [field: string]: unknown }): void {
  process.send?.(message);
}

/** For a child: reports the failure and leaves. */
export function fail(error: unknown): void {
  report({ type: "error", message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
  process.disconnect();
}
