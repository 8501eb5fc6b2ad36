// A sandboxed session's network (docs/security.md, "The sandbox"). bubblewrap gives every
// sandbox a network namespace of its own (sandbox.ts), which holds only its own loopback: that is
// `network: "none"`. For `network: "egress"`, before the session's command runs:
//   1. inside the sandbox, still root (sandbox.ts, its first step), the step says "ns" on a
//      fifo, then installs nftables rules in the sandbox's namespace that refuse the slirp
//      network's own hosts but its resolver, SESSION_DENY_CIDRS and every address of the runner's
//      host; the session's user has no capability to change them. The step then says "ready"
//      and waits;
//   2. meanwhile (from "ns" on, so the two overlap) the runner, as root, starts slirp4netns on
//      that namespace (a user-mode network stack: the session's traffic leaves as the runner
//      host's own sockets), with the host's loopback disabled, in a sandbox of its own
//      (`--enable-sandbox --enable-seccomp`), ending when the runner does (`--exit-fd`);
//   3. once both are done, the runner writes "go" on a second fifo, and the sandbox drops to the
//      session's user. Until then only that step runs in the namespace.
// The fifos live in a root-only folder. Nothing on the runner's machine (the output log, the
// edge, an inspector, any other service) can be reached either way: the host's loopback is
// another namespace's, and its other addresses are refused.
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, constants, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { Socket } from "node:net";
import { networkInterfaces } from "node:os";
import { log } from "../../shared/log.js";
import type { FifoPair } from "./fifo-stock.js";
import { ROOT_ENV, requireTool } from "./launch.js";
import { SANDBOX_RESOLVER } from "./sandbox.js";

const SLIRP_NETWORK = "10.0.2.0/24";
const ATTACH_DEADLINE_MS = 10_000;

export interface NetworkTools {
  slirp4netns: string;
  mkfifo: string;
}

/** The tools an egress network needs; a start-up error names what is missing. */
export function networkTools(): NetworkTools {
  const why = "sessions with network egress";
  requireTool("nft", why); // run inside the sandbox, from the system's /usr
  return { slirp4netns: requireTool("slirp4netns", why), mkfifo: requireTool("mkfifo", why) };
}

/** Every address of this host's interfaces (loopback included), as CIDRs of one address. */
export function hostAddresses(): string[] {
  const found: string[] = [];
  for (const entries of Object.values(networkInterfaces())) {
    for (const entry of entries ?? []) {
      const address = entry.address.split("%")[0];
      found.push(entry.family === "IPv6" ? `${address}/128` : `${address}/32`);
    }
  }
  return found;
}

/** The nftables ruleset for an egress sandbox's namespace (policy accept; the refused ranges reject at once). */
export function egressRules(denyCidrs: readonly string[], hostCidrs: readonly string[]): string {
  const refused = [SLIRP_NETWORK, ...denyCidrs, ...hostCidrs];
  const rules = refused.map((cidr) => (cidr.includes(":") ? `    ip6 daddr ${cidr} reject` : `    ip daddr ${cidr} reject`));
  return [
    "table inet ptybroker {",
    "  chain output {",
    "    type filter hook output priority 0; policy accept;",
    '    oifname "lo" accept',
    `    ip daddr ${SANDBOX_RESOLVER} udp dport 53 accept`,
    `    ip daddr ${SANDBOX_RESOLVER} tcp dport 53 accept`,
    ...rules,
    "  }",
    "}",
    "",
  ].join("\n");
}

/** One egress session's network, from before its spawn to its end. */
export class EgressNetwork {
  private readonly folder: string;
  readonly info: string;
  readonly go: string;
  private readonly infoFd: number;
  private goFd: number | null;
  private reader: Socket | null = null;
  private slirp: ChildProcess | null = null;
  private closed = false;
  private allowed!: () => void;
  /** Resolves once the session's command may run (allow()): the edge holds the session's link. */
  private readonly allowance = new Promise<void>((resolve) => (this.allowed = resolve));

  constructor(
    fifos: FifoPair,
    private readonly tools: NetworkTools,
  ) {
    this.folder = fifos.folder;
    this.info = fifos.info;
    this.go = fifos.go;
    // Both ends opened read-write and non-blocking: neither this open nor the root step's blocks.
    this.infoFd = openSync(this.info, constants.O_RDWR | constants.O_NONBLOCK);
    this.goFd = openSync(this.go, constants.O_RDWR | constants.O_NONBLOCK);
  }

  /** The fifos the root step opens as bubblewrap's fds 3 and 4. */
  rootEnv(): Record<string, string> {
    return { PTYB_INFO: this.info, PTYB_GO: this.go };
  }

  /**
   * Attaches slirp4netns to the sandbox whose outside pid is `pid` (bubblewrap's) as soon as its
   * namespace exists ("ns"), while the sandbox installs its rules; once both are done (slirp4netns
   * ready, the sandbox's "ready") and the session is allowed to run (allow(): its link is open,
   * which may come before or after), lets the session's command run. Nothing of the session runs
   * before "go": in between, only the network step (root) is in the namespace.
   */
  async attach(pid: number): Promise<void> {
    const start = performance.now();
    const deadline = Date.now() + ATTACH_DEADLINE_MS;
    const said = this.listen(deadline);
    await said.ns;
    const nsMs = performance.now() - start;
    // The sandbox's init, bubblewrap's child: in the sandbox's namespaces.
    const init = firstChild(pid);
    if (init === null) throw new Error("the sandbox is gone");
    const slirp = this.startSlirp(init, deadline).then(() => performance.now() - start);
    const rules = said.ready.then(() => performance.now() - start);
    const [slirpMs, readyMs] = await Promise.all([slirp, rules]);
    // Not under the deadline: the session's link may still be on its way (it ends the session if it never comes).
    await this.allowance;
    if (this.closed || this.goFd === null) throw new Error("the session ended while its network was set up");
    writeSync(this.goFd, "go\n");
    closeSync(this.goFd);
    this.goFd = null;
    // Where a create's time goes (docs/benchmarks.md, "sandbox cost"): all from attach's start.
    log.debug("session.network", { outcome: "attached", nsMs: Math.round(nsMs), readyMs: Math.round(readyMs), slirpMs: Math.round(slirpMs) });
  }

  /** The session's command may run once the network is ready (the edge holds its link). Safe to call again. */
  allow(): void {
    this.allowed();
  }

  /** The sandbox's network step's two words on the info fifo: "ns" (its namespace exists), then "ready" (its rules are installed). */
  private listen(deadline: number): { ns: Promise<void>; ready: Promise<void> } {
    let nsSaid!: () => void;
    let readySaid!: () => void;
    let failed!: (error: Error) => void;
    const failure = new Promise<never>((_, reject) => (failed = reject));
    const ns = Promise.race([new Promise<void>((resolve) => (nsSaid = resolve)), failure]);
    const ready = Promise.race([new Promise<void>((resolve) => (readySaid = resolve)), failure]);
    // Whichever is not awaited when it fails is not an unhandled rejection.
    ns.catch(() => {});
    ready.catch(() => {});
    const reader = new Socket({ fd: this.infoFd, readable: true, writable: false });
    this.reader = reader;
    let text = "";
    const timer = setTimeout(() => fail(new Error("the sandbox did not get ready")), Math.max(1, deadline - Date.now()));
    const fail = (error: Error) => {
      clearTimeout(timer);
      reader.destroy();
      failed(error);
    };
    reader.on("data", (chunk: Buffer) => {
      // Bounded: the step says "ns\nready\n" and nothing else.
      text = (text + chunk.toString("utf8")).slice(0, 64);
      if (text.startsWith("ns\n")) nsSaid();
      if (text.startsWith("ns\nready\n")) {
        clearTimeout(timer);
        reader.destroy();
        readySaid();
      } else if (!"ns\nready\n".startsWith(text)) {
        fail(new Error(`the sandbox said ${JSON.stringify(text)}`));
      }
    });
    reader.on("error", fail);
    return { ns, ready };
  }

  private startSlirp(pid: number, deadline: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const args = ["--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox", "--enable-seccomp", "--ready-fd=3", "--exit-fd=4", String(pid), "tap0"];
      const slirp = spawn(this.tools.slirp4netns, args, { env: { ...ROOT_ENV }, stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
      this.slirp = slirp;
      let stderr = "";
      slirp.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
      const timer = setTimeout(() => reject(new Error("slirp4netns did not get ready")), Math.max(1, deadline - Date.now()));
      const ready = slirp.stdio[3] as Socket;
      ready.once("data", () => {
        clearTimeout(timer);
        resolve();
      });
      slirp.once("exit", (code, signal) => {
        clearTimeout(timer);
        if (!this.closed) log.debug("session.network", { outcome: "slirp_exited", code, signal, stderr: stderr.trim().slice(-200) });
        reject(new Error(`slirp4netns exited (${code ?? signal}): ${stderr.trim().slice(-200)}`));
      });
      slirp.once("error", reject);
    });
  }

  /** The session is over: stops slirp4netns, closes the fifos, removes the folder. Safe to call twice. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.reader?.destroy();
    if (!this.reader) closeSync(this.infoFd);
    if (this.goFd !== null) closeSync(this.goFd);
    this.goFd = null;
    if (this.slirp && this.slirp.exitCode === null && this.slirp.signalCode === null) this.slirp.kill("SIGTERM");
    (this.slirp?.stdio[4] as Socket | undefined)?.destroy();
    rmSync(this.folder, { recursive: true, force: true });
  }
}

/** The first child of `pid` (/proc/<pid>/task/<pid>/children), or null. */
export function firstChild(pid: number): number | null {
  try {
    const first = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(" ")[0];
    return first ? Number(first) : null;
  } catch {
    return null;
  }
}
