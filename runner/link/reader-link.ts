// A link that only reads a session's output log for the edge: opened when the pool asks this
// runner to `serve` a session that has no host (exited, lost, or its runner gone), and closed
// after a quiet spell. It answers `read`s, and `screen`s by rebuilding the screen from the log.
import { log } from "../../shared/log.js";
import { EdgeLinkMessage, type RunnerLinkMessage, parseMessage } from "../../shared/protocol.js";
import type { RunnerConfig } from "../config.js";
import { EdgeLink, MAX_EDGE_MESSAGE_BYTES } from "./edge-link.js";
import { edgeSocketUrl, linkPath } from "./link-url.js";
import { ReadServer } from "../log/log-reads.js";
import type { OutputLog } from "../log/output-log.js";
import { rebuildScreen } from "../agent/screen-rebuild.js";

const IDLE_MS = 30_000;

export class ReaderLink {
  private readonly link: EdgeLink;
  private readonly reads: ReadServer;
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    config: RunnerConfig,
    private readonly key: string,
    tenant: string,
    sessionId: string,
    linkToken: string,
    private readonly outputLog: OutputLog,
    private readonly onClosed: (key: string) => void,
  ) {
    this.link = new EdgeLink(
      {
        url: edgeSocketUrl(config.brokerUrl, `${linkPath(tenant, sessionId)}?role=reader`),
        runnerToken: config.runnerToken,
        runnerId: config.runnerId,
        linkToken,
        key,
      },
      {
        onOpen: () => this.touch(),
        onMessage: (data, isBinary) => this.onMessage(data, isBinary),
        onDown: () => this.reads.cancelAll(),
        onGone: () => this.close(),
      },
    );
    this.reads = new ReadServer(outputLog, key, this.link);
  }

  start(): void {
    this.link.start();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.reads.cancelAll();
    this.link.stop(1000, "reader idle");
    this.onClosed(this.key);
  }

  /** The output log may have lost data: the edge drops what it kept of it. */
  logMaybeLost(): void {
    this.send({ type: "log_reset" });
  }

  private touch(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.close(), IDLE_MS);
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) return log.warn("reader.frame", { key: this.key, outcome: "unexpected_binary" });
    const parsed = parseMessage(EdgeLinkMessage, data.toString("utf8"), MAX_EDGE_MESSAGE_BYTES);
    if (!parsed.ok) return log.warn("reader.message", { key: this.key, outcome: "invalid", reason: parsed.reason });
    const message = parsed.value;
    if (this.reads.handle(message)) return this.touch();
    if (message.type === "screen") return this.rebuild(message);
    if (message.type === "run") {
      this.send({ type: "call_failed", id: message.id, code: "SESSION_EXITED", message: "the session has no process running" });
    }
  }

  /** A screen drawn from the log, on a fresh emulator of the session's size. */
  private rebuild(message: Extract<EdgeLinkMessage, { type: "screen" }>): void {
    const { id, rebuild } = message;
    this.touch();
    if (!rebuild) {
      this.send({ type: "call_failed", id, code: "INTERNAL", message: "a reader has no live screen: ask for a rebuild" });
      return;
    }
    rebuildScreen(this.outputLog, this.key, rebuild).then(
      (screen) => {
        this.touch();
        this.send({ type: "screen_result", id, screen });
      },
      (error: unknown) => {
        log.warn("reader.screen", { key: this.key, id, error });
        this.send({ type: "call_failed", id, code: "INTERNAL", message: "the screen could not be rebuilt from the output log" });
      },
    );
  }

  private send(message: RunnerLinkMessage): void {
    if (!this.closed) this.link.send(JSON.stringify(message));
  }
}
