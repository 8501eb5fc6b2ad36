// A session's process without a terminal (`pty: false`, docs/protocol.md §3, "Processes without a
// terminal"): stdin, stdout and stderr are pipes. Started with the same command line, user, folder,
// environment and cgroup as a terminal session (runner/isolation/isolation.ts prepares both), in a
// process group of its own so a signal for "the foreground" reaches whatever it started.
import { type ChildProcess, spawn } from "node:child_process";
import type { Readable } from "node:stream";
import { log } from "../../shared/log.js";
import type { OutputStream } from "../../shared/protocol.js";
import type { ProcessExit, SessionProcess } from "./session-process.js";

export interface PipeOptions {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
}

/**
 * After the process exits, how long its pipes may stay open (a child it left holds them, say
 * `sleep 100 &`) before its exit is reported anyway; the session's cgroup then ends that child.
 */
export const PIPE_CLOSE_WAIT_MS = 500;

export function spawnPipes(options: PipeOptions): SessionProcess {
  const child = spawn(options.command, options.args, {
    cwd: options.cwd,
    env: options.env,
    detached: true, // its own process group (and session): signals reach what it starts
    stdio: ["pipe", "pipe", "pipe"],
  });
  const pid = child.pid;
  if (pid === undefined) {
    child.on("error", () => {}); // the reason is thrown below; never unhandled
    throw new Error(`${options.command} could not be started`);
  }
  return new PipeProcess(child, pid);
}

class PipeProcess implements SessionProcess {
  private readonly dataListeners: ((bytes: Buffer, stream: OutputStream) => void)[] = [];
  private readonly exitListeners: ((exit: ProcessExit) => void)[] = [];
  private readonly ended: Record<OutputStream, boolean> = { stdout: false, stderr: false };
  private exit: ProcessExit | null = null;
  private reported = false;
  private paused = false;
  /** The pipes had PIPE_CLOSE_WAIT_MS after the exit to close: what they hold is taken and they are closed. */
  private waitedEnough = false;
  private closeTimer: NodeJS.Timeout | undefined;
  private stdinFailed = false;

  constructor(
    private readonly child: ChildProcess,
    readonly pid: number,
  ) {
    this.read(this.out("stdout"), "stdout");
    this.read(this.out("stderr"), "stderr");
    child.stdin?.on("error", (error: NodeJS.ErrnoException) => {
      // EPIPE: the process closed its stdin or exited; what was written is lost, as with any pipe.
      if (!this.stdinFailed) log.debug("pipe.stdin", { pid, outcome: error.code ?? "error" });
      this.stdinFailed = true;
    });
    child.on("error", (error) => log.warn("pipe.process", { pid, outcome: "error", error }));
    child.on("exit", (code, signal) => {
      this.exit = { exitCode: signal ? null : code, signal: signal ?? null };
      this.closeTimer = setTimeout(() => {
        this.waitedEnough = true;
        this.maybeReport();
      }, PIPE_CLOSE_WAIT_MS);
      this.maybeReport();
    });
  }

  onData(listener: (bytes: Buffer, stream: OutputStream) => void): void {
    this.dataListeners.push(listener);
  }

  onExit(listener: (exit: ProcessExit) => void): void {
    this.exitListeners.push(listener);
  }

  write(bytes: Uint8Array): void {
    const stdin = this.child.stdin;
    if (!stdin || stdin.destroyed || stdin.writableEnded) return;
    stdin.write(Buffer.from(bytes)); // a copy: the caller's buffer may be reused
  }

  pendingInput(): number {
    return this.child.stdin?.writableLength ?? 0;
  }

  closeStdin(): void {
    const stdin = this.child.stdin;
    if (stdin && !stdin.writableEnded) stdin.end();
  }

  resize(): void {
    // no terminal: nothing to size (the edge refuses a resize with NOT_A_TTY before it comes here)
  }

  foregroundGroup(): number {
    return this.pid;
  }

  signalProcess(signal: string): void {
    process.kill(this.pid, signal);
  }

  pause(): void {
    this.paused = true;
    this.child.stdout?.pause();
    this.child.stderr?.pause();
  }

  resume(): void {
    this.paused = false;
    this.child.stdout?.resume();
    this.child.stderr?.resume();
    // What the pipes held comes out as 'data' first; then the exit, if it is due.
    if (this.exit) setImmediate(() => this.maybeReport());
  }

  private out(stream: OutputStream): Readable {
    const pipe = stream === "stdout" ? this.child.stdout : this.child.stderr;
    if (!pipe) throw new Error(`spawned without a ${stream} pipe`);
    return pipe;
  }

  private read(pipe: Readable, stream: OutputStream): void {
    pipe.on("data", (bytes: Buffer) => {
      for (const listener of this.dataListeners) listener(bytes, stream);
    });
    pipe.on("end", () => {
      this.ended[stream] = true;
      this.maybeReport();
    });
    pipe.on("error", (error) => log.warn("pipe.read", { pid: this.pid, stream, error }));
  }

  /**
   * The exit is reported once, after both pipes reached their end (every byte read), or, when
   * a pipe stays open past PIPE_CLOSE_WAIT_MS, after taking what it holds and closing it. While
   * paused (flow control) nothing is taken: the report waits for resume().
   */
  private maybeReport(): void {
    if (!this.exit || this.reported) return;
    const done = this.ended.stdout && this.ended.stderr;
    if (!done) {
      if (!this.waitedEnough || this.paused) return;
      for (const stream of ["stdout", "stderr"] as const) {
        const pipe = this.out(stream);
        if (this.ended[stream]) continue;
        // read() hands what the pipe holds to the 'data' listener; a listener may pause us.
        while (!this.paused && pipe.readableLength > 0 && pipe.read() !== null);
        if (this.paused) return;
        log.info("pipe.close", { pid: this.pid, stream, outcome: "held_open" });
        pipe.destroy();
      }
    }
    this.reported = true;
    if (this.closeTimer) clearTimeout(this.closeTimer);
    this.child.stdin?.destroy();
    const exit = this.exit;
    for (const listener of this.exitListeners) listener(exit);
  }
}
