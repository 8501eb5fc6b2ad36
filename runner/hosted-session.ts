// One session this runner hosts: the link to the session's Durable Object (redialled when it
// drops, while the process keeps running), the process on its PTY or with pipes (`pty: false`),
// the coalescer, the acknowledged delivery of output through the output log (each chunk with
// its stream, read time and terminal size), and, on a terminal, the agent layer (its screen and
// shell, runner/agent/agent-host.ts) fed the same output.
import { log } from "../shared/log.js";
import {
  type ChunkMeta,
  EdgeLinkMessage,
  type PoolMessage,
  type RunnerLinkMessage,
  decodeFrame,
  parseMessage,
} from "../shared/protocol.js";
import { AgentHost, type AgentLayer } from "./agent/agent-host.js";
import { AgentThreadHost } from "./agent/agent-thread.js";
import type { RunnerConfig } from "./config.js";
import { Coalescer } from "./flow/coalescer.js";
import { Delivery } from "./flow/delivery.js";
import { InputGate } from "./flow/input-gate.js";
import { PauseReasons } from "./flow/pause-reasons.js";
import { WriterInputs } from "./flow/writer-input.js";
import { isolation } from "./isolation/isolation.js";
import { EdgeLink, MAX_EDGE_MESSAGE_BYTES } from "./link/edge-link.js";
import { edgeSocketUrl, linkPath } from "./link/link-url.js";
import { ReadServer } from "./log/log-reads.js";
import type { OutputLog } from "./log/output-log.js";
import { spawnPipes } from "./process/pipe-process.js";
import { spawnPty } from "./process/pty.js";
import type { ProcessExit, SessionProcess } from "./process/session-process.js";

type SpawnMessage = Extract<PoolMessage, { type: "spawn" }>;

/** Input waiting for the process beyond which the edge refuses more, and beyond which it is dropped. */
const INPUT_SOFT_BYTES = 1 << 20;
const INPUT_HARD_BYTES = 4 << 20;

/** The end of a prompt drawn by a shell with integration (OSC 133 B). */
const PROMPT_DRAWN = "\x1b]133;B\x07";

/** How long an exited session waits for the edge to confirm the exit before it lets go. */
const EXIT_CONFIRM_MS = 5 * 60_000;

export class HostedSession {
  readonly key: string;
  private readonly link: EdgeLink;
  private readonly delivery: Delivery;
  private readonly inputGate: InputGate;
  /** Each writer's numbered input, written once and acknowledged when the terminal took it. */
  private readonly writers: WriterInputs;
  private readonly reads: ReadServer;
  private proc: SessionProcess | undefined;
  /** The terminal's size now, kept with each chunk read; 0 × 0 for pipes. */
  private size = { cols: 0, rows: 0 };
  private coalescer: Coalescer | undefined;
  private agent: AgentLayer | undefined;
  private agentFailed = false;
  /** startProcess ran (at spawn for a sandbox that holds its command, else at the first resume). */
  private startTried = false;
  /** Why the process could not be started, told to the edge on the link's resume. */
  private startFailure: string | undefined;
  /** The edge has been told the process started. */
  private startReported = false;
  /** The process is paused while the edge or the screen is behind. */
  private readonly pauses = new PauseReasons<"delivery" | "screen">({
    pause: () => this.proc?.pause(),
    resume: () => this.proc?.resume(),
  });
  private killTimer: NodeJS.Timeout | undefined;
  private exitTimer: NodeJS.Timeout | undefined;
  private exited = false;
  private ended = false;
  private released = false;
  private appendFailing = false;
  private retainedReported = 0;
  /** Input bytes taken from the edge over all links, and whether stdin was closed (pipes): told at each resume. */
  private inputTaken = 0;
  private stdinClosed = false;
  private retainedCheckedAt = 0;
  /** Why the runner itself ended the process, reported with its exit. */
  private endReason: "drain" | "oom" | undefined;
  private markOver!: () => void;
  /**
   * Resolves when the session is over here: its exit reached the edge (the edge closed the
   * link for good), the edge gave it up, or the exit went unconfirmed for EXIT_CONFIRM_MS.
   */
  readonly over = new Promise<void>((resolve) => {
    this.markOver = resolve;
  });

  constructor(
    private readonly config: RunnerConfig,
    private readonly spawn: SpawnMessage,
    private readonly outputLog: OutputLog,
    /**
     * Called once when the session no longer occupies a slot on this runner: its process has
     * exited (the exit report may still be on its way) or it ended before starting.
     */
    private readonly onReleased: (key: string) => void,
  ) {
    this.key = spawn.key;
    this.link = new EdgeLink(
      {
        url: edgeSocketUrl(config.brokerUrl, linkPath(spawn.tenant, spawn.sessionId)),
        runnerToken: config.runnerToken,
        runnerId: config.runnerId,
        linkToken: spawn.linkToken,
        key: this.key,
        settled: () => this.delivery.unacknowledged === 0,
      },
      {
        onOpen: () => log.info("link.open", { key: this.key }),
        onDown: () => {
          this.delivery.linkDown();
          this.reads.cancelAll(); // the edge fails them; their clients resume by offset
        },
        onMessage: (data, isBinary) => this.onLinkMessage(data, isBinary),
        onGone: (reason) => this.onEdgeGone(reason),
      },
    );
    this.reads = new ReadServer(outputLog, this.key, this.link);
    this.inputGate = new InputGate(
      () => this.proc?.pendingInput() ?? 0,
      { softBytes: INPUT_SOFT_BYTES, hardBytes: INPUT_HARD_BYTES },
      (full) => this.send({ type: "input_state", full }),
    );
    this.writers = new WriterInputs(
      () => this.proc?.pendingInput() ?? 0,
      (acks) => this.send({ type: "input_ack", acks }),
    );
    this.delivery = new Delivery(
      {
        append: (offset, bytes, meta) => this.outputLog.append(this.key, offset, bytes, meta),
        send: (frame) => this.link.send(frame),
        pause: () => this.pauses.pause("delivery"),
        resume: () => this.pauses.resume("delivery"),
        onAppendFailed: (error) => {
          if (!this.appendFailing) log.warn("log.append", { key: this.key, outcome: "failed", error });
          this.appendFailing = true;
        },
        onAppended: (end) => this.onAppended(end),
      },
      { highWater: config.flowHighWater, lowWater: config.flowLowWater },
    );
  }

  start(): void {
    this.link.start();
    // A sandbox that holds its command until the link is open (an egress network's "go") is set
    // up while the link is dialled: bubblewrap, its rules and slirp4netns overlap the dial
    // (docs/benchmarks.md, issue 26). Anything else starts once the edge has resumed.
    if (!isolation().holdsCommand(this.spawn.spec)) return;
    // A new session: nothing the sandbox writes may be trimmed before the edge holds it.
    this.outputLog.hold(this.key, 0);
    this.startProcess();
  }

  /**
   * The runner is shutting down and the drain time is up: ends the process as `kill` does and
   * reports its exit with `reason: "drain"`. A session whose process has not started yet (its
   * link never opened; a sandbox that holds its command may be up, the command not) is given
   * up: it never starts here.
   */
  drain(graceMs: number): void {
    if (this.exited || this.ended) return;
    if (!this.proc || !this.startReported) {
      log.info("session.drain", { key: this.key, outcome: "not_started" });
      if (this.proc) isolation().end(this.key);
      this.end();
      return;
    }
    // A kill the edge asked for (DELETE, a timer) is already under way: its reason stands.
    if (!this.killTimer) this.endReason = "drain";
    this.kill(graceMs);
  }

  /**
   * Ends the process (SIGHUP; after `graceMs`, SIGKILL to every process the session started);
   * the exit is reported as usual.
   */
  kill(graceMs: number, signal = "SIGHUP"): void {
    const proc = this.proc;
    if (!proc || this.exited) return;
    // The session's own leader (inside a sandbox, the session's command rather than the sandbox
    // around it), checked to be the session's (runner/isolation/signals.ts).
    void isolation().signal(this.key, proc.pid, -1, signal);
    this.killTimer ??= setTimeout(() => isolation().end(this.key), graceMs);
  }

  private startProcess(): void {
    if (this.startTried) return;
    this.startTried = true;
    const { spec, tenant } = this.spawn;
    let proc: SessionProcess;
    let shellIntegration = false;
    const tty = spec.pty !== false;
    try {
      // As its own user, in its own cgroup where the runner has them
      // (runner/isolation/isolation.ts).
      const launch = isolation().prepare(this.key, tenant, spec);
      shellIntegration = launch.shellIntegration;
      proc = tty ? spawnPty({ ...launch, cols: spec.cols, rows: spec.rows }) : spawnPipes(launch);
      isolation().started(this.key, proc.pid);
    } catch (error) {
      isolation().end(this.key);
      const message = error instanceof Error ? error.message : String(error);
      log.warn("session.spawn", { key: this.key, outcome: "failed", error: message });
      // Told to the edge on the link's resume (onResume), which may not have come yet.
      this.startFailure = message;
      return;
    }
    this.proc = proc;
    if (tty) {
      this.size = { cols: spec.cols, rows: spec.rows };
      const port = {
        send: (message: RunnerLinkMessage) => this.send(message),
        type: (bytes: Uint8Array) => this.writeInput(bytes),
        screenBehind: (behind: boolean) => (behind ? this.pauses.pause("screen") : this.pauses.resume("screen")),
        failed: (error: string) => this.agentLost(error),
      };
      const agentOptions = { cols: spec.cols, rows: spec.rows, shellIntegration, screenIdleMs: this.config.screenIdleMs };
      // In the agent thread (the default), or on this thread (RUNNER_AGENT_THREAD=0).
      this.agent = this.config.agentThread ? new AgentThreadHost(this.key, port, agentOptions) : new AgentHost(this.key, port, agentOptions);
    }
    const coalescer = new Coalescer((offset, bytes, stream, at) => this.output(offset, bytes, { stream, at, ...this.size }), {
      maxBytes: this.config.coalesceBytes,
      delayMs: this.config.coalesceMs,
      leadingEdge: true,
    });
    this.coalescer = coalescer;
    proc.onData((bytes, stream) => {
      coalescer.push(bytes, stream);
      // The shell has drawn its prompt (OSC 133 B) and waits: what it printed goes now, not at the
      // end of the coalescing window, so a person sees the prompt and `run` hears the command end at once.
      if (shellIntegration && bytes.includes(PROMPT_DRAWN)) coalescer.flush();
    });
    proc.onExit((exit) => this.onProcessExit(exit));
    // A sandbox that holds its command is only prepared here: the command starts at the link's resume.
    const held = isolation().holdsCommand(spec);
    log.info(held ? "session.prepared" : "session.started", { key: this.key, pid: proc.pid, command: spec.command, pty: tty });
  }

  private onProcessExit(reported: ProcessExit): void {
    this.exited = true;
    const { exit, oom } = isolation().exit(this.key, reported);
    if (oom) this.endReason = "oom";
    if (this.killTimer) clearTimeout(this.killTimer);
    this.coalescer?.flush(true);
    this.agent?.processExited(exit.exitCode);
    log.info("session.exited", { key: this.key, ...exit, reason: this.endReason, offset: this.coalescer?.offset });
    // Whatever the process left running (setsid, nohup, double fork) ends with it.
    isolation().end(this.key);
    const message: RunnerLinkMessage = {
      type: "exited",
      exitCode: exit.exitCode,
      signal: exit.signal,
      ...(this.endReason ? { reason: this.endReason } : {}),
    };
    // Acknowledged input goes before the exit, so a writer hears its last keys arrived.
    this.writers.settle();
    this.release();
    this.delivery.finish(JSON.stringify(message));
    void this.outputLog
      .expire(this.key, this.config.outputTtlSec)
      .catch((error: unknown) => log.warn("log.expire", { key: this.key, error }));
    // The edge confirms by closing the link (4010); if it never does, let go eventually.
    this.exitTimer = setTimeout(() => this.end(), EXIT_CONFIRM_MS);
  }

  private onLinkMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      const frame = decodeFrame(data);
      if (frame.op === "input") {
        this.inputTaken += frame.data.byteLength;
        this.writeInput(frame.data);
      } else if (frame.op === "writerInput") {
        // Counted as taken from the link whatever the writer's count says (the edge's ledger counts the same).
        this.inputTaken += frame.data.byteLength;
        this.writerInput(frame.writer, frame.offset, frame.base, frame.data);
      } else log.warn("link.frame", { key: this.key, outcome: frame.op === "invalid" ? frame.reason : "bad_op" });
      return;
    }
    const parsed = parseMessage(EdgeLinkMessage, data.toString("utf8"), MAX_EDGE_MESSAGE_BYTES);
    if (!parsed.ok) {
      log.warn("link.message", { key: this.key, outcome: "invalid", reason: parsed.reason });
      return;
    }
    const message = parsed.value;
    try {
      switch (message.type) {
        case "resume":
          return this.onResume(message.offset);
        case "ack":
          this.delivery.ack(message.offset);
          // The edge holds every byte below this: the tenant bound may trim up to here, not past.
          return this.outputLog.hold(this.key, message.offset);
        case "read":
        case "read_cancel":
          return void this.reads.handle(message);
        case "resize":
          return this.resize(message.cols, message.rows);
        case "eof":
          if (this.spawn.spec.pty === false) this.stdinClosed = true;
          return this.proc?.closeStdin();
        case "signal": {
          const proc = this.proc;
          // To the session's processes in the foreground group only (runner/isolation/signals.ts).
          if (proc && !this.exited) void isolation().signal(this.key, proc.pid, proc.foregroundGroup(), message.signal);
          return;
        }
        case "kill":
          return this.kill(message.graceMs, message.signal);
        case "screen":
        case "run":
          if (this.agent && !this.agentFailed) return void this.agent.handle(message);
          return this.send({
            type: "call_failed",
            id: message.id,
            code: "INTERNAL",
            message: this.agentFailed
              ? "the session's screen failed (docs/architecture.md, \"The emulator off the hot path\")"
              : this.proc
                ? "the session has no terminal"
                : "the session has not started",
          });
        case "pong":
          return;
      }
    } catch (error) {
      log.warn("link.apply", { key: this.key, type: message.type, error });
    }
  }

  /**
   * A terminal's new size. Output read before it is emitted first, so every chunk carries the
   * size it was read at (a recording's `r` events sit at their offset).
   */
  private resize(cols: number, rows: number): void {
    if (!this.agent) return; // pipes: no terminal (the edge refuses this with NOT_A_TTY)
    this.coalescer?.flush();
    this.proc?.resize(cols, rows);
    this.size = { cols, rows };
    this.agent.resize(cols, rows);
  }

  /** A coalesced chunk: to the edge through the log, and to the screen and shell tracker. */
  private output(offset: number, bytes: Buffer, meta: ChunkMeta): void {
    this.delivery.push(offset, bytes, meta);
    if (this.agentFailed) return;
    try {
      this.agent?.output(offset, bytes);
    } catch (error) {
      log.error("agent.output", { key: this.key, offset, error });
      this.agentLost(error instanceof Error ? error.message : String(error));
    }
  }

  /** The agent layer threw (here or in its thread): it is off for this session from here on; its output still flows. */
  private agentLost(error: string): void {
    if (this.agentFailed) return;
    this.agentFailed = true;
    log.warn("agent.lost", { key: this.key, error });
    this.pauses.resume("screen");
  }

  /** The output log may have lost data: the edge drops what it kept of it. */
  logMaybeLost(): void {
    this.send({ type: "log_reset" });
  }

  /** Input for the process, within the input bound; false when it was not written. */
  private writeInput(bytes: Uint8Array, writer?: { key: string; end: number }): boolean {
    const proc = this.proc;
    if (!proc || this.exited) return false;
    if (!this.inputGate.write(bytes, (b) => proc.write(b))) {
      log.warn("session.input", { key: this.key, outcome: "dropped", bytes: bytes.byteLength, writer: writer !== undefined });
      if (!writer) this.send({ type: "input_dropped", bytes: bytes.byteLength });
      return false;
    }
    this.writers.wrote(bytes.byteLength, writer);
    return true;
  }

  /** A writer's numbered input: its new part is written once; a resend or a frame past a hole is not. */
  private writerInput(writer: string, offset: number, base: number, data: Uint8Array): void {
    if (!this.proc || this.exited) return;
    const take = this.writers.take(writer, offset, base, data);
    if (take.write === null) {
      if (take.why === "hole") log.warn("session.input", { key: this.key, outcome: "hole", offset });
      return;
    }
    // Refused by the input bound, it stays the writer's to send again (never a silent drop).
    if (!this.writeInput(take.write, { key: writer, end: take.end })) this.writers.refused(writer, offset);
  }

  /** Every (re)opened link starts with the edge's offset: start the process once, then resend. */
  private onResume(offset: number): void {
    // Before the process starts: nothing it writes may be trimmed until the edge holds it.
    this.outputLog.hold(this.key, offset);
    // First on every link: the edge holds input until it hears what this side took, then sends
    // again what a dead link lost (docs/protocol.md §7, "Input across a new link").
    const eof = this.spawn.spec.pty === false ? { eof: this.stdinClosed } : {};
    this.send({ type: "input_state", full: this.inputGate.isFull, taken: this.inputTaken, ...eof });
    // What each writer has had written, for an edge that restarted and forgot (its clients' handshakes).
    const writers = this.writers.all();
    if (writers.length > 0) this.send({ type: "input_ack", acks: writers });
    if (!this.ended) this.startProcess();
    if (this.startFailure !== undefined) {
      this.send({ type: "failed", error: this.startFailure });
      this.end();
      return;
    }
    if (!this.proc) return;
    // The edge holds the link: a command the sandbox holds may run now.
    if (isolation().holdsCommand(this.spawn.spec) && !this.startReported) log.info("session.started", { key: this.key, pid: this.proc.pid, held: true });
    isolation().allow(this.key);
    // Said once even if the process ended before the link opened (its exit follows through the delivery).
    if (!this.exited || !this.startReported) this.send({ type: "started", pid: this.proc.pid, ...isolation().report(this.key) });
    this.startReported = true;
    // A `retained` sent while the link was down was lost with it.
    if (this.retainedReported > 0) this.send({ type: "retained", from: this.retainedReported });
    this.delivery.resume(offset);
    this.agent?.resumed();
  }

  /** The edge refused or closed the link for good: the session is over there. */
  private onEdgeGone(reason: string): void {
    log.info("link.gone", { key: this.key, reason, exited: this.exited });
    if (this.proc && !this.exited) isolation().end(this.key);
    this.end();
  }

  private onAppended(end: number): void {
    if (this.appendFailing) {
      log.info("log.append", { key: this.key, outcome: "recovered", offset: end });
      this.appendFailing = false;
    }
    // Tell the edge where the log now starts, at most once per eighth of the retention.
    if (end - this.retainedCheckedAt < this.config.retainBytes / 8) return;
    this.retainedCheckedAt = end;
    void this.outputLog.retainedFrom(this.key).then(
      (from) => {
        if (from !== null) this.logTrimmed(from);
      },
      () => {},
    );
  }

  /** The log now starts at `from` (a trim): the edge hears it, once per move. */
  logTrimmed(from: number): void {
    if (from <= this.retainedReported) return;
    this.retainedReported = from;
    this.send({ type: "retained", from });
  }

  private send(message: RunnerLinkMessage): void {
    this.link.send(JSON.stringify(message));
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.killTimer) clearTimeout(this.killTimer);
    if (this.exitTimer) clearTimeout(this.exitTimer);
    this.coalescer?.dispose();
    this.agent?.dispose();
    this.delivery.dispose();
    this.inputGate.dispose();
    this.writers.dispose();
    this.link.stop(1000, "session ended");
    // Nothing is resent from here: the tenant bound may trim all of it.
    this.outputLog.hold(this.key, null);
    this.release();
    this.markOver();
  }

  private release(): void {
    if (this.released) return;
    this.released = true;
    this.onReleased(this.key);
  }
}
