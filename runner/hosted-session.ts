// One session this runner hosts: the link socket to the session's Durable Object, the
// process on its PTY, and the coalescer between them.
import WebSocket from "ws";
import { log } from "../shared/log.js";
import {
  EdgeLinkMessage,
  type PoolMessage,
  type RunnerLinkMessage,
  decodeFrame,
  encodeOutput,
  parseMessage,
} from "../shared/protocol.js";
import { Coalescer } from "./coalescer.js";
import type { RunnerConfig } from "./config.js";
import { sessionCwd, sessionEnv } from "./environment.js";
import { edgeSocketUrl, linkPath } from "./link-url.js";
import { type PtyExit, type PtyProcess, spawnPty } from "./pty.js";
import { killSessionProcesses } from "./reaper.js";

type SpawnMessage = Extract<PoolMessage, { type: "spawn" }>;

export class HostedSession {
  readonly key: string;
  private socket: WebSocket | undefined;
  private pty: PtyProcess | undefined;
  private coalescer: Coalescer | undefined;
  private killTimer: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    private readonly config: RunnerConfig,
    private readonly spawn: SpawnMessage,
    /** Called once when the session no longer occupies this runner. */
    private readonly onEnd: (key: string) => void,
  ) {
    this.key = spawn.key;
  }

  start(): void {
    const url = edgeSocketUrl(this.config.brokerUrl, linkPath(this.spawn.tenant, this.spawn.sessionId));
    const socket = new WebSocket(url, {
      headers: { authorization: `Bearer ${this.config.runnerToken}`, "x-runner-id": this.config.runnerId },
      maxPayload: 1 << 20,
    });
    this.socket = socket;
    socket.binaryType = "nodebuffer";
    socket.on("open", () => this.startProcess());
    socket.on("message", (data, isBinary) => this.onLinkMessage(data as Buffer, isBinary));
    socket.on("close", (code) => this.onLinkClosed(code));
    socket.on("error", (error) => log.warn("link.error", { key: this.key, error }));
  }

  /** Ends the process (SIGHUP, SIGKILL after `graceMs`); the exit is reported as usual. */
  kill(graceMs: number): void {
    const pty = this.pty;
    if (!pty || this.ended) return;
    try {
      pty.signalProcess("SIGHUP");
    } catch (error) {
      log.warn("session.signal", { key: this.key, signal: "SIGHUP", error });
    }
    this.killTimer ??= setTimeout(() => killSessionProcesses(pty.pid), graceMs);
  }

  private startProcess(): void {
    const { spec, tenant } = this.spawn;
    let pty: PtyProcess;
    try {
      pty = spawnPty({
        command: spec.command,
        args: spec.args,
        cwd: sessionCwd(this.config.workspace, tenant, spec.cwd),
        env: sessionEnv(spec.env),
        cols: spec.cols,
        rows: spec.rows,
      });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log.warn("session.spawn", { key: this.key, outcome: "failed", error: message });
      this.send({ type: "failed", error: message });
      this.end();
      return;
    }
    this.pty = pty;
    const coalescer = new Coalescer((offset, bytes) => this.socket?.send(encodeOutput(offset, bytes)), {
      maxBytes: this.config.coalesceBytes,
      delayMs: this.config.coalesceMs,
    });
    this.coalescer = coalescer;
    pty.onData((bytes) => coalescer.push(bytes));
    pty.onExit((exit) => this.onProcessExit(exit));
    this.send({ type: "started", pid: pty.pid });
    log.info("session.started", { key: this.key, pid: pty.pid, command: spec.command });
  }

  private onProcessExit(exit: PtyExit): void {
    this.coalescer?.flush(true);
    this.send({ type: "exited", exitCode: exit.exitCode, signal: exit.signal });
    log.info("session.exited", { key: this.key, ...exit });
    if (this.pty) killSessionProcesses(this.pty.pid);
    this.end();
  }

  private onLinkMessage(data: Buffer, isBinary: boolean): void {
    const pty = this.pty;
    if (!pty) return;
    if (isBinary) {
      const frame = decodeFrame(data);
      if (frame.op === "input") pty.write(frame.data);
      else log.warn("link.frame", { key: this.key, outcome: "bad_op" });
      return;
    }
    const parsed = parseMessage(EdgeLinkMessage, data.toString("utf8"));
    if (!parsed.ok) {
      log.warn("link.message", { key: this.key, outcome: "invalid", reason: parsed.reason });
      return;
    }
    const message = parsed.value;
    try {
      if (message.type === "resize") pty.resize(message.cols, message.rows);
      else if (message.type === "signal") pty.signalForeground(message.signal);
      else if (message.type === "kill") this.kill(message.graceMs);
    } catch (error) {
      log.warn("link.apply", { key: this.key, type: message.type, error });
    }
  }

  /** Until links resume by offset, a process that lost its link is ended rather than orphaned. */
  private onLinkClosed(code: number): void {
    if (this.ended) return;
    log.warn("link.closed", { key: this.key, code });
    if (this.pty) this.kill(0);
    else this.end();
  }

  private send(message: RunnerLinkMessage): void {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.killTimer) clearTimeout(this.killTimer);
    this.coalescer?.dispose();
    this.socket?.close(1000, "session ended");
    this.onEnd(this.key);
  }
}
