// The tenant bound (the tenant's `logBytes`, else TENANT_LOG_BYTES; docs/protocol.md §7a, "The tenant bound"): the retained
// output of all of one tenant's sessions together, running and ended, is kept within a bound.
// Past it the tenant's OLDEST retained output goes first, whole chunks, never another tenant's,
// and never at or above a session's floor (the first offset its live edge has not acknowledged:
// the runner resends those bytes from memory after a reconnect, so the log must still hold them).
//
// What goes is decided here, once, for both logs: `trimTenant` asks the log's TenantStore for the
// tenant's count and its oldest sessions, trims the oldest one's front, settles the count, and
// goes round again until the tenant is within its bound. Each log keeps the count and removes the
// chunks its own way (memory-log.ts in process; redis-log-tenant.ts with scripts on Redis, so that
// runners sharing one Redis share one count). `TenantTrims` runs one such loop per tenant at a
// time and says when none is running.
import { log } from "../../shared/log.js";

/** The tenant a log key (`tenant/sessionId/incarnation`) belongs to: the part before its first `/`. */
export function tenantOf(key: string): string {
  const slash = key.indexOf("/");
  return slash < 0 ? key : key.slice(0, slash);
}

/** One of the tenant's sessions that holds output, as the store sees it now. */
export interface TenantCandidate {
  key: string;
  /**
   * Where its oldest retained chunk stands in the tenant's order: the chunk's read time (ms) in
   * Redis, its append sequence in process. Lower is older.
   */
  oldest: number;
  /** The first offset its live edge has not acknowledged: nothing at or above it goes. null: none. */
  floor: number | null;
}

export interface TenantPick {
  /** The tenant's retained bytes as the store counts them. */
  total: number;
  /** Its sessions that hold output, oldest first, as many as asked; empty when `total` is within the bound. */
  oldest: TenantCandidate[];
}

export type FrontTrim =
  /** The session's log is not there any more (expired, deleted): everything it was counted for goes. */
  | { gone: true }
  /**
   * `removed` bytes went from the front of its log, in whole chunks; `oldest` is the order of the
   * oldest chunk left (null: none is left) and `retainedFrom` the offset its log now starts at.
   */
  | { gone: false; removed: number; oldest: number | null; retainedFrom: number };

/** What a log gives the tenant bound: its count, its oldest sessions, and front trims. */
export interface TenantStore {
  /** The tenant's count, and when it is over `bound` its `count` oldest sessions that hold output. */
  pick(tenant: string, bound: number, count: number): Promise<TenantPick>;
  /**
   * Removes whole chunks from the front of the candidate's log while what it removed is below
   * `excess`, the chunk ends at or below the floor, and the chunk is not newer than `notAfter`
   * (the next session's oldest chunk), so the tenant's output goes oldest first across sessions.
   */
  trimFront(candidate: TenantCandidate, excess: number, notAfter: number): Promise<FrontTrim>;
  /** Takes what `trimFront` found into the tenant's count and the session's place in the order. */
  settle(tenant: string, key: string, trim: FrontTrim): Promise<void>;
}

/** Called when a trim moved the start of a session's log: it now starts at `retainedFrom`. */
export type TrimmedListener = (key: string, retainedFrom: number) => void;

/** Rounds of one trim loop (each: pick, trim one session's front, settle) before it stops. */
export const MAX_TRIM_ROUNDS = 256;
/** Sessions a pick returns at most: those found held back by their floor, and two more. */
const MAX_CANDIDATES = 64;

export type TrimOutcome =
  /** The tenant is within its bound. */
  | "within"
  /** Over it, but every session the pick returned is held by its floor (or none holds output). */
  | "held"
  /** Over it after MAX_TRIM_ROUNDS rounds: the next append asks again. */
  | "rounds";

/**
 * Trims the tenant's oldest output until its count is within `bound`. Each round trims the
 * oldest session that can give something up, up to the next session's oldest chunk, so two
 * sessions that wrote at the same time give up their output in the order it was written. A
 * session that gives nothing (everything it holds is at or above its floor) is passed over for
 * the rest of this loop. A session whose log is gone is subtracted whole.
 */
export async function trimTenant(
  store: TenantStore,
  tenant: string,
  bound: number,
  onTrimmed: TrimmedListener,
): Promise<TrimOutcome> {
  const held = new Set<string>();
  for (let round = 0; round < MAX_TRIM_ROUNDS; round++) {
    const { total, oldest } = await store.pick(tenant, bound, Math.min(MAX_CANDIDATES, held.size + 2));
    if (total <= bound) return "within";
    const [first, next] = oldest.filter((candidate) => !held.has(candidate.key));
    if (!first) return "held";
    const trim = await store.trimFront(first, total - bound, next?.oldest ?? Number.POSITIVE_INFINITY);
    if (!trim.gone && trim.removed === 0 && trim.oldest === first.oldest) {
      held.add(first.key);
      continue;
    }
    // Something changed: bytes went, the log was gone, or the order the store had was stale.
    await store.settle(tenant, first.key, trim);
    if (!trim.gone && trim.removed > 0) onTrimmed(first.key, trim.retainedFrom);
  }
  return "rounds";
}

/**
 * Each tenant's bound in this runner: the tenant's own (the admin API's `logBytes`, sent with each
 * spawn; the newest one given wins) or the runner's TENANT_LOG_BYTES. A lowered bound trims at the
 * tenant's next append, as any bound does.
 */
export class TenantBounds {
  private readonly own = new Map<string, number>();

  /** `fallback`: TENANT_LOG_BYTES (unset: no bound). */
  constructor(private readonly fallback = Number.POSITIVE_INFINITY) {}

  of(tenant: string): number {
    return this.own.get(tenant) ?? this.fallback;
  }

  /** The tenant's own bound from now on; undefined: the runner's again. */
  set(tenant: string, bytes: number | undefined): void {
    if (bytes === undefined) this.own.delete(tenant);
    else this.own.set(tenant, bytes);
  }
}

/** At most one trim loop per tenant at a time in this runner; a request during one runs it again. */
export class TenantTrims {
  private readonly loops = new Map<string, { again: boolean }>();
  private readonly running = new Set<Promise<void>>();
  private readonly listeners: TrimmedListener[] = [];

  constructor(
    private readonly store: TenantStore,
    private readonly bounds: TenantBounds,
  ) {}

  onTrimmed(listener: TrimmedListener): void {
    this.listeners.push(listener);
  }

  /** The tenant may be over its bound: trims it, now or once the loop running for it is done. */
  request(tenant: string): void {
    const current = this.loops.get(tenant);
    if (current) {
      current.again = true;
      return;
    }
    const state = { again: true };
    this.loops.set(tenant, state);
    const loop = this.run(tenant, state).finally(() => {
      this.loops.delete(tenant);
      this.running.delete(loop);
    });
    this.running.add(loop);
  }

  /** Resolves once no trim loop is running (those started meanwhile included). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  private async run(tenant: string, state: { again: boolean }): Promise<void> {
    while (state.again) {
      state.again = false;
      try {
        const outcome = await trimTenant(this.store, tenant, this.bounds.of(tenant), (key, from) => {
          for (const listener of this.listeners) listener(key, from);
        });
        // Held: the floors of sessions whose output the edge has not acknowledged yet; it will.
        if (outcome === "held") log.debug("log.tenant_trim", { tenant, outcome });
        else if (outcome === "rounds") log.warn("log.tenant_trim", { tenant, outcome, rounds: MAX_TRIM_ROUNDS });
      } catch (error) {
        // The log failed (Redis away): the next append over the bound asks again.
        log.warn("log.tenant_trim", { tenant, outcome: "failed", error });
        return;
      }
    }
  }
}
