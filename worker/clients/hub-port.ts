// What the client hub (client-hub.ts) needs from its session, as callbacks, and what it is told
// about a client by the route that let it in (headers callers cannot set: sessions-routes.ts).
import type { ScreenSnapshot } from "../../shared/agent.js";
import type { Failure } from "../../shared/errors.js";
import type { ServerMessage } from "../../shared/protocol.js";
import type { Session, SignalName } from "../../shared/session.js";
import type { Limits } from "../env.js";
import type { ReplayFrom } from "./replays.js";
import type { SocketSubscriber } from "./subscribers.js";

/** The second tag of a socket opened with an API key (or a token it minted): closed when the key is revoked. */
export const keyTag = (keyId: string) => `key:${keyId}`;

/** Who a client is, as the route said in headers callers cannot set (sessions-routes.ts). */
export interface ClientCredential {
  owner: boolean;
  /** The API key it came with, or that minted its session token. */
  keyId: string | null;
  /** The tenant's own MAX_CLIENTS_PER_SESSION, where the admin API set one. */
  maxClients: number | undefined;
}

export function clientCredential(headers: Headers): ClientCredential {
  const max = Number(headers.get("x-ptyb-max-clients") ?? "");
  return {
    owner: headers.get("x-ptyb-role") === "owner",
    keyId: headers.get("x-ptyb-key"),
    maxClients: Number.isSafeInteger(max) && max > 0 ? max : undefined,
  };
}

/** What the hub needs from its session; callbacks, so the hub never holds the session object. */
export interface HubPort {
  /** Offset of the next output byte (everything below it has been fanned out). */
  offset(): number;
  /** Oldest offset the log is known to hold. */
  retainedFrom(): number;
  /** A read found nothing in [from, to) before any byte of a replay. */
  noteLeadingGap(from: number, to: number): void;
  /** The session has a terminal status. */
  ended(): boolean;
  /** No client can hold an offset past the edge's: the session ended, or its output is all here. */
  offsetExact(): boolean;
  exitMessage(): ServerMessage;
  view(): Session;
  limits(): Limits;
  keyForLog(): string | null;
  /** Input from a client (raw frame or 0x02), to be checked against its role and sent on. */
  onInput(sub: SocketSubscriber, bytes: Uint8Array): void;
  /** A writer's numbered input (0x07) at `offset` of its own input. */
  onNumberedInput(sub: SocketSubscriber, offset: number, bytes: Uint8Array): void;
  /** What the edge knows of a writer's acknowledged input (null: nothing now), for its `hello`. */
  writerAcked(key: string): number | null;
  onResize(sub: SocketSubscriber, cols: number, rows: number): void;
  onSignal(sub: SocketSubscriber, signal: SignalName): void;
  /** `{"type":"eof"}`: close the process's stdin (a terminal gets Ctrl+D). */
  onEof(sub: SocketSubscriber): void;
  /** A client attached or left (count() changed). */
  clientsChanged(): void;
  /** The screen now (from the host's emulator, or rebuilt from the log). */
  screen(): Promise<ScreenSnapshot | Failure>;
}

/** Where a subscriber starts: an offset, everything retained, live output only, or the current screen. */
export type StartFrom = ReplayFrom | "screen";
