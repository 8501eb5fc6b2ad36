// Questions the session object asks a runner over a link and waits for (docs/protocol.md §3,
// "Agents"): `screen` (the host's live emulator, or, with no host, a reader link that rebuilds
// the screen from the log) and `run` (the host's shell). Each call has an id; its answer counts
// only from the link it was sent on, and a link that closes fails the calls it carried.
import type { ScreenSnapshot } from "../../shared/agent.js";
import { type Failure, fail } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import type { EdgeLinkMessage, RunnerLinkMessage } from "../../shared/protocol.js";
import { sendQuietly } from "../io/sockets.js";

/** A screen that gets no answer within this time fails (a rebuild reads up to the whole retained log). */
const SCREEN_TIMEOUT_MS = 30_000;
/** A run's answer may come this long after its own timeout (the runner answers `timedOut` itself). */
const RUN_MARGIN_MS = 15_000;
const SUMMON_RETRY_MS = 1000;

type Answer = Extract<RunnerLinkMessage, { type: "screen_result" | "run_result" | "call_failed" }>;
type RunAnswer = Extract<RunnerLinkMessage, { type: "run_result" }>["result"];

interface Call {
  /** The message without its id; a screen waiting for a reader link carries its rebuild. */
  message: DistributiveOmit<Extract<EdgeLinkMessage, { type: "screen" | "run" }>, "id">;
  link: WebSocket | undefined;
  settle: (answer: Answer | Failure) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** Where a rebuilt screen comes from: the log's [from, to) fed to an emulator of cols × rows. */
export interface Rebuild {
  from: number;
  to: number;
  cols: number;
  rows: number;
}

export class LinkCalls {
  private nextId = 1;
  private readonly calls = new Map<number, Call>();
  private summoning = false;

  constructor(private readonly port: CallsPort) {}

  /** The screen now: from the host's emulator, else rebuilt from the log by a reader link. */
  async screen(rebuild: Rebuild): Promise<ScreenSnapshot | Failure> {
    const host = this.port.host();
    const answer = host
      ? await this.call({ type: "screen" }, host, SCREEN_TIMEOUT_MS)
      : await this.call({ type: "screen", rebuild }, this.port.reader(), SCREEN_TIMEOUT_MS);
    if ("failure" in answer) return answer;
    if (answer.type === "screen_result") return answer.screen;
    return this.unexpected(answer);
  }

  /** Types `command` into the host's shell; answers when it ends or `timeoutMs` passes. */
  async run(command: string, timeoutMs: number): Promise<RunAnswer | Failure> {
    const host = this.port.host();
    if (!host) return fail("CONFLICT", "session is not connected to a runner right now");
    const answer = await this.call({ type: "run", command, timeoutMs }, host, timeoutMs + RUN_MARGIN_MS);
    if ("failure" in answer) return answer;
    if (answer.type === "run_result") return answer.result;
    return this.unexpected(answer);
  }

  /** An answer from `link`; one for a call sent on another link is ignored. */
  answered(link: WebSocket, answer: Answer): void {
    const call = this.calls.get(answer.id);
    if (call?.link !== link) return log.warn("link.answer", { key: this.port.keyForLog(), id: answer.id, outcome: "unknown_call" });
    this.finish(answer.id, answer);
  }

  /** A reader link opened: screens waiting for one go out on it. */
  readerOpened(link: WebSocket): void {
    for (const [id, call] of this.calls) if (!call.link) this.send(id, call, link);
  }

  /** A link closed: the calls it carried fail. */
  linkClosed(link: WebSocket): void {
    for (const [id, call] of this.calls) {
      if (call.link === link) this.finish(id, fail("INTERNAL", "the runner's link closed before it answered; try again"));
    }
  }

  private call(message: Call["message"], link: WebSocket | undefined, timeoutMs: number): Promise<Answer | Failure> {
    const id = this.nextId++;
    return new Promise((settle) => {
      const timer = setTimeout(() => {
        const waited = !this.calls.get(id)?.link;
        this.finish(id, fail(waited ? "NO_RUNNER" : "INTERNAL", waited ? "no runner came to answer" : "the runner did not answer in time"));
      }, timeoutMs);
      const call: Call = { message, link: undefined, settle, timer };
      this.calls.set(id, call);
      if (link) this.send(id, call, link);
      else this.summon();
    });
  }

  private send(id: number, call: Call, link: WebSocket): void {
    call.link = link;
    sendQuietly(link, JSON.stringify({ ...call.message, id } satisfies EdgeLinkMessage));
  }

  /** Calls waiting for a reader ask the pool for one, again every second while none can be asked. */
  private summon(): void {
    if (this.summoning || ![...this.calls.values()].some((call) => !call.link)) return;
    this.summoning = true;
    void this.port.summonReader().then((asked) => {
      this.summoning = false;
      if (!asked) setTimeout(() => this.summon(), SUMMON_RETRY_MS);
    });
  }

  private finish(id: number, answer: Answer | Failure): void {
    const call = this.calls.get(id);
    if (!call) return;
    this.calls.delete(id);
    clearTimeout(call.timer);
    if ("failure" in answer) log.warn("link.call", { key: this.port.keyForLog(), type: call.message.type, outcome: answer.failure.code });
    if (!("failure" in answer) && answer.type === "call_failed") call.settle(fail(answer.code, answer.message));
    else call.settle(answer);
  }

  private unexpected(answer: Answer): Failure {
    return fail("INTERNAL", `the runner answered ${answer.type}`);
  }
}

// ---- Shared types ----

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** What the calls need from their session. */
export interface CallsPort {
  /** The open host link, if any. */
  host(): WebSocket | undefined;
  /** An open reader link, if any. */
  reader(): WebSocket | undefined;
  /** Asks the pool for a reader link; resolves false when no runner can be asked. */
  summonReader(): Promise<boolean>;
  keyForLog(): string | null;
}
