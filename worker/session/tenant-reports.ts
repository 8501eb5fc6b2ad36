// A session's reports to its tenant (tenant/tenant.ts): the index row the list is served from
// and the lifecycle events of `GET /v1/events`. Sent one at a time in the order the session made
// them, so `session.created` is never overtaken by the `session.updated` of a fast start.
import { log } from "../../shared/log.js";
import type { Session, TenantEventType } from "../../shared/session.js";
import type { TenantRpc } from "../rpc.js";

type TenantStub = DurableObjectStub<TenantRpc>;

/** Tries per report: the tenant object may be restarting (a deploy); after that it is logged. */
const TRIES = 3;

export class TenantReports {
  private chain: Promise<void> = Promise.resolve();
  /** Reports queued before a hold that was released with `keep = false` are dropped. */
  private generation = 0;

  constructor(
    private readonly tenant: () => TenantStub,
    private readonly keyForLog: () => string | null,
  ) {}

  /**
   * Holds later reports until the returned function is called: with `true` they go, with
   * `false` they are dropped (the create they describe did not happen).
   */
  hold(): (keep: boolean) => void {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    this.chain = this.chain.then(() => gate);
    return (keep) => {
      if (!keep) this.generation++;
      open();
    };
  }

  /** The session as it is now, into the index; with `event`, also into the tenant's events. */
  record(session: Session, event: TenantEventType | null): void {
    void this.enqueue("record", (stub) => stub.record(session, event));
  }

  /**
   * The session is being purged: its index row goes and `session.deleted` is told. Resolves,
   * after every earlier report, with whether the tenant took it.
   */
  deleted(session: Session): Promise<boolean> {
    return this.enqueue("deleted", (stub) => stub.forget(session.id, session));
  }

  private enqueue(what: string, send: (stub: TenantStub) => Promise<unknown>): Promise<boolean> {
    const generation = this.generation;
    const sent = this.chain.then(async () => {
      if (generation !== this.generation) return false;
      for (let attempt = 1; ; attempt++) {
        try {
          await send(this.tenant());
          return true;
        } catch (error) {
          if (attempt >= TRIES) {
            log.error("session.tenant_report", { key: this.keyForLog(), what, outcome: "lost", error });
            return false;
          }
        }
      }
    });
    this.chain = sent.then(() => undefined);
    return sent;
  }
}
