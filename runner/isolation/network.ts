// A sandboxed session's network (docs/security.md, "The sandbox"). bubblewrap gives every
// sandbox a network namespace of its own (sandbox.ts), which holds only its own loopback: that is
// `network: "none"`. For `network: "egress"`, before the session's command runs:
//   1. inside the sandbox, still root (sandbox.ts, its network step), nftables rules are
//      installed in the sandbox's namespace that refuse the slirp network's own hosts but its
//      resolver, SESSION_DENY_CIDRS and every address of the runner's host; the session's user
//      has no capability to change them. The step then says "ready" on a fifo and waits;
//   2. the runner, as root, starts slirp4netns on that namespace (a user-mode network stack: the
//      session's traffic leaves as the runner host's own sockets), with the host's loopback
//      disabled, in a sandbox of its own (`--enable-sandbox --enable-seccomp`), ending when the
//      runner does (`--exit-fd`);
//   3. the runner writes "go" on a second fifo, and the sandbox drops to the session's user.
// The fifos live in a root-only folder. Nothing on the runner's machine (the output log, the
// edge, an inspector, any other service) can be reached either way: the host's loopback is
// another namespace's, and its other addresses are refused.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { closeSync, constants, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { Socket } from "node:net";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { log } from "../../shared/log.js";
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

  constructor(
    runFolder: string,
    id: string,
    private readonly tools: NetworkTools,
  ) {
    this.folder = join(runFolder, id);
    mkdirSync(this.folder, { mode: 0o700 });
    this.info = join(this.folder, "info");
    this.go = join(this.folder, "go");
    execFileSync(tools.mkfifo, ["-m", "600", this.info, this.go], { env: { ...ROOT_ENV } });
    // Both ends opened read-write and non-blocking: neither this open nor the root step's blocks.
    this.infoFd = openSync(this.info, constants.O_RDWR | constants.O_NONBLOCK);
    this.goFd = openSync(this.go, constants.O_RDWR | constants.O_NONBLOCK);
  }

  /** The fifos the root step opens as bubblewrap's fds 3 and 4. */
  rootEnv(): Record<string, string> {
    return { PTYB_INFO: this.info, PTYB_GO: this.go };
  }

  /**
   * Once the sandbox whose outside pid is `pid` (bubblewrap's) says it is ready, attaches
   * slirp4netns to its namespace and lets the session's command run.
   */
  async attach(pid: number): Promise<void> {
    const start = performance.now();
    const deadline = Date.now() + ATTACH_DEADLINE_MS;
    await this.ready(deadline);
    const readyMs = performance.now() - start;
    // The sandbox's init, bubblewrap's child: in the sandbox's namespaces.
    const init = firstChild(pid);
    if (init === null) throw new Error("the sandbox is gone");
    await this.startSlirp(init, deadline);
    if (this.closed || this.goFd === null) throw new Error("the session ended while its network was set up");
    writeSync(this.goFd, "go\n");
    closeSync(this.goFd);
    this.goFd = null;
    // Where a create's time goes (docs/benchmarks.md, "sandbox cost").
    log.debug("session.network", { outcome: "attached", readyMs: Math.round(readyMs), slirpMs: Math.round(performance.now() - start - readyMs) });
  }

  /** Resolves when the sandbox's network step says "ready" (its rules are installed). */
  private ready(deadline: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const reader = new Socket({ fd: this.infoFd, readable: true, writable: false });
      this.reader = reader;
      let text = "";
      const timer = setTimeout(() => fail(new Error("the sandbox did not get ready")), Math.max(1, deadline - Date.now()));
      const fail = (error: Error) => {
        clearTimeout(timer);
        reader.destroy();
        reject(error);
      };
      reader.on("data", (chunk: Buffer) => {
        text += chunk.toString("utf8");
        if (text.includes("ready\n")) {
          clearTimeout(timer);
          reader.destroy();
          resolve();
        }
      });
      reader.on("error", fail);
    });
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
