// A suite on the shared stack (test/global-setup.ts): its edge's URL, the two tenants' REST
// clients, and a cleanup that ends the suite's clients and purges its sessions after the file.
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, inject } from "vitest";
import type { Session } from "../shared/session.js";
import { SuiteCleanup, type SuiteCleanupOptions } from "./cleanup.js";
import { TENANTS } from "./global-setup.js";
import { Api } from "./rest-client.js";
import { TermClient, type TermClientOptions } from "./term-client.js";

/** The shared runner's workspace: RUNNER_WORKSPACE's default. */
export const SHARED_WORKSPACE = join(tmpdir(), "ptybroker-workspace");

export interface SharedStackSuite {
  /** The shared edge. */
  url: string;
  /** Tenant acme on the shared edge. */
  api: Api;
  /** Tenant globex on the shared edge (the other tenant). */
  globex: Api;
  cleanup: SuiteCleanup;
  /** A session created with `on` (acme by default), purged after the file. */
  session(body?: Record<string, unknown>, on?: Api): Promise<Session>;
  /** A client of the shared edge (acme's key by default), ended after the file. */
  connect(id: string, options?: TermClientOptions, key?: string): TermClient;
  /** Sessions of acme made some other way (the SDK, the CLI, a page), purged after the file. */
  purgeLater(...ids: string[]): void;
}

/**
 * Resolves once the shared stack places a session: a probe (`/bin/true`) created and purged,
 * asked again while the edge answers 503 NO_RUNNER. test/start.test.ts rebuilds web/dist, which
 * the shared edge watches: its reload cuts every socket, the shared runner's control socket too,
 * and a suite that created its first session while the runner was redialling got NO_RUNNER.
 */
async function placesSessions(api: Api, deadlineMs = 30_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const res = await api.request<Session & { error?: { code: string } }>("POST", "/v1/sessions", { command: "/bin/true" });
    if (res.status === 201) {
      await api.destroy(res.body.id);
      return;
    }
    if (res.status !== 503 || res.body.error?.code !== "NO_RUNNER" || Date.now() > deadline) {
      throw new Error(`the shared stack places no session: ${res.status} ${JSON.stringify(res.body)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Call at a suite file's top level: the cleanup's afterAll is the file's, and the file starts
 * once the shared stack places sessions.
 */
export function onSharedStack(options: SuiteCleanupOptions = {}): SharedStackSuite {
  const url = inject("edgeUrl");
  const api = new Api(url, TENANTS.acme);
  const cleanup = new SuiteCleanup(options);
  beforeAll(() => placesSessions(api));
  return {
    url,
    api,
    globex: new Api(url, TENANTS.globex),
    cleanup,
    async session(body = {}, on = api) {
      const s = await on.create(body);
      cleanup.session(on, s.id);
      return s;
    },
    connect(id, clientOptions = {}, key = TENANTS.acme) {
      return cleanup.client(new TermClient(url, id, key, clientOptions));
    },
    purgeLater(...ids) {
      for (const id of ids) cleanup.session(api, id);
    },
  };
}
