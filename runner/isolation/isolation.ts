// The boundaries around sessions (docs/security.md), set up once at the runner's start and used by
// every hosted session: who a session runs as (session-user.ts), its sandbox (sandbox.ts: its own
// namespaces, filesystem view and network, network.ts), its limits (limits.ts) and workspace
// filesystem (tenant-disk.ts), its folder and environment (environment.ts), how it is started
// (launch.ts), what holds its processes (containment.ts), and, for a login bash, the shell
// integration it starts with (runner/agent/shell-integration.ts).
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { constants } from "node:os";
import { join, resolve } from "node:path";
import { log } from "../../shared/log.js";
import type { PoolMessage } from "../../shared/protocol.js";
import type { RunnerConfig, SandboxConfig } from "../config.js";
import { statFields } from "../process/proc.js";
import type { ProcessExit } from "../process/session-process.js";
import { installShellIntegration, integratedBashArgs, isLoginBash } from "../agent/shell-integration.js";
import { Containment } from "./containment.js";
import { FifoStock } from "./fifo-stock.js";
import { sessionCwd, sessionEnv, sessionFolders } from "./environment.js";
import { type Launch, ROOT_SHELL, dropStep, keyringStep, requireTool, rootStep, sessionStep, systemTool } from "./launch.js";
import { Limits, type SessionLimits } from "./limits.js";
import { EgressNetwork, type NetworkTools, egressRules, firstChild, hostAddresses, networkTools } from "./network.js";
import { sessionMembers } from "./reaper.js";
import { deadRunFolders, stateFolder } from "./run-record.js";
import { SANDBOX_BASH_INIT, SANDBOX_HOME, sandboxCommand } from "./sandbox.js";
import { writeSeccompFilter } from "./seccomp.js";
import { SignalHelper } from "./signals.js";
import { type SessionUsers, prepareHome, prepareWorkspaceRoot, sessionUsers, tenantUserName } from "./session-user.js";
import { TenantDisks } from "./tenant-disk.js";

type SpawnSpec = Extract<PoolMessage, { type: "spawn" }>["spec"];

export interface SessionLaunch {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** hand the terminal to the session's user (when it is not the runner's) */
  terminalOwner: { uid: number; gid: number } | undefined;
  /** the session is a bash started with the shell integration (OSC 133 marks) */
  shellIntegration: boolean;
}

/** What a session got, as the Session record shows it (docs/protocol.md §4). */
export interface SandboxReport {
  sandbox: "bwrap" | "none";
  network?: "none" | "egress";
  limits?: SessionLimits;
}

/** The sandbox's parts, present when RUNNER_SANDBOX=bwrap. */
interface SandboxParts {
  config: SandboxConfig;
  bwrap: string;
  setpriv: string;
  network: NetworkTools;
  limits: Limits;
  disks: TenantDisks;
  /** root-only folder of this run's per-session network fifos */
  folder: string;
  /** an empty file in that folder, bound over the host's files in /etc a sandbox must not see */
  empty: string;
  /** egress sessions' fifo pairs, made ahead in that folder */
  fifos: FifoStock;
  /** the seccomp filter's BPF (seccomp.ts), in that folder */
  seccomp: string;
  /** the system's python3: the seccomp filter and each session's fresh keyring */
  python: string;
}

interface Scope {
  id: string;
  report: SandboxReport;
  network: EgressNetwork | null;
  /** The tenant's workspace filesystem the session counts on (TenantDisks.release at its end). */
  disk?: string;
}

/** How many ended sessions' memory verdicts wait for their exits (one that never exits is dropped oldest first). */
const ENDED_KEPT = 1000;
const SIGNAL_NAMES = new Map<number, string>(Object.entries(constants.signals).map(([name, num]) => [num, name]));

export class Isolation {
  private readonly scopes = new Map<string, Scope>();
  /** Sessions ended before their exit was reported: whether the memory limit killed in them. */
  private readonly endedOom = new Map<string, boolean>();

  private constructor(
    /** how signals reach sessions (signals.ts); null: a runner without root nor python3 */
    private readonly signals: SignalHelper | null,
    private readonly workspace: string,
    private readonly users: SessionUsers,
    /** setpriv's path under a root runner, else null (sessions run as the runner's user) */
    private readonly setpriv: string | null,
    readonly containment: Containment,
    /** the shell integration's init file (readable by every session user, writable by the runner only), or null without */
    private readonly bashInit: string | null,
    private readonly sandbox: SandboxParts | null,
  ) {}

  static async start(config: RunnerConfig, isRoot = process.getuid?.() === 0): Promise<Isolation> {
    // Refuse a configuration that cannot be honoured before touching anything.
    const sandboxed = config.sandbox.kind === "bwrap";
    if (sandboxed && !isRoot) {
      throw new Error("RUNNER_SANDBOX=bwrap: the runner must be root to give each session its sandbox (set RUNNER_SANDBOX=none for local development only)");
    }
    const setpriv = isRoot ? requireTool("setpriv", "sessions cannot be started as their own users") : null;
    if (isRoot && !existsSync(ROOT_SHELL)) throw new Error(`sessions cannot be started as their own users: ${ROOT_SHELL} is required (it closes what the runner inherited)`);
    // Signals go through pidfds (signals.ts): a root runner does not start without them.
    const python3 = isRoot ? requireTool("python3", "signals cannot be held to the session's processes (Debian: apt-get install python3-minimal)") : systemTool("python3");
    if (!python3) log.warn("runner.signals", { outcome: "unchecked", note: "no python3: signals reach sessions without pidfds (sessions run as this user)" });
    const bwrap = sandboxed ? requireTool("bwrap", "RUNNER_SANDBOX=bwrap (Debian: apt-get install bubblewrap)") : null;
    if (sandboxed) requireTool("mount", "RUNNER_SANDBOX=bwrap (util-linux: it bounds a sandbox's ptys)");
    const python = sandboxed ? requireTool("python3", "RUNNER_SANDBOX=bwrap: the seccomp filter (Debian: apt-get install python3-seccomp)") : null;
    const tools = sandboxed ? networkTools() : null;
    const users = sessionUsers(config.sessionUser, config.workspace, isRoot);
    if (isRoot) prepareWorkspaceRoot(config.workspace);
    const bashInit = shellIntegrationFile(config.workspace);
    const containment = await Containment.start({ workspace: config.workspace, runnerId: config.runnerId, isRoot });
    let parts: SandboxParts | null = null;
    if (sandboxed && bwrap && setpriv && tools && python) {
      const runName = `${process.pid}_${randomBytes(4).toString("hex")}`;
      const sandboxes = join(stateFolder(config.workspace, isRoot), "sandbox");
      for (const dead of deadRunFolders(sandboxes)) rmSync(dead, { recursive: true, force: true });
      const folder = join(sandboxes, runName);
      mkdirSync(folder, { recursive: true, mode: 0o700 });
      const empty = join(folder, "empty");
      writeFileSync(empty, "", { mode: 0o444 });
      const seccomp = join(folder, "seccomp.bpf");
      const seccompInstructions = writeSeccompFilter(python, seccomp);
      const limits = await Limits.start(runName, containment.runCgroup);
      const fifos = new FifoStock(folder, tools.mkfifo);
      if (config.sandbox.network === "egress") fifos.refill();
      const disks = new TenantDisks(config.workspace, config.sandbox.diskMiB);
      parts = { config: config.sandbox, bwrap, setpriv, network: tools, limits, disks, folder, empty, fifos, seccomp, python };
      const { network, diskMiB, ptys } = config.sandbox;
      log.info("runner.sandbox", { sandbox: "bwrap", limits: limits.layout, network, diskMiB, ptys, seccompInstructions });
    } else {
      log.warn("runner.sandbox", {
        sandbox: "none",
        outcome: "unsandboxed",
        note: "RUNNER_SANDBOX=none: sessions share this machine's network, processes and files (local development only)",
      });
    }
    const signals = python3 ? new SignalHelper(python3) : null;
    signals?.warm();
    return new Isolation(signals, config.workspace, users, setpriv, containment, bashInit, parts);
  }

  /** "bwrap" when every session gets a sandbox, else "none". */
  get kind(): "bwrap" | "none" {
    return this.sandbox ? "bwrap" : "none";
  }

  /**
   * Everything node-pty needs to start the session `key`: its user (made on the tenant's first
   * session), its sandbox, folder, environment, cgroups and network. Throws (the session fails)
   * when one of them cannot be had; call end(key) then.
   */
  prepare(key: string, tenant: string, spec: SpawnSpec): SessionLaunch {
    if (this.scopes.has(key)) throw new Error(`session ${key} is already prepared`);
    // Opaque: names no tenant, session or incarnation (cgroups, fifos).
    const id = randomBytes(8).toString("hex");
    const scope: Scope = { id, report: { sandbox: this.kind }, network: null };
    this.scopes.set(key, scope);
    const user = this.users.forTenant(tenant);
    const hostRoot = resolve(this.workspace, tenant);
    const sandbox = this.sandbox;
    const root = sandbox ? SANDBOX_HOME : hostRoot;
    const folders = sessionFolders(root, spec.cwd);
    const shellIntegration = spec.pty !== false && this.bashInit !== null && isLoginBash(spec.command, spec.args);
    const bashInit = sandbox ? SANDBOX_BASH_INIT : this.bashInit;
    const args = shellIntegration && bashInit ? integratedBashArgs(bashInit) : spec.args;
    const env = sessionEnv(spec.env, { user: user.name, home: root, shell: user.shell });
    const terminalOwner = user.switched ? { uid: user.uid, gid: user.gid } : undefined;

    if (!sandbox) {
      let cwd = folders.root;
      if (user.switched) prepareHome(hostRoot, user);
      else cwd = sessionCwd(root, spec.cwd);
      const enter = cwd === folders.target ? null : folders.target;
      const step = sessionStep({ env, enter, command: spec.command, args });
      const cgroupProcs = this.containment.open(key, id);
      const launch: Launch =
        this.setpriv && user.switched
          ? rootStep(dropStep(this.setpriv, user, step), cgroupProcs ? [cgroupProcs] : [])
          : { command: step[0], args: step.slice(1), env: {} };
      return { command: launch.command, args: launch.args, cwd, env: launch.env, terminalOwner, shellIntegration };
    }

    sandbox.disks.ensure(tenant, hostRoot, user, spec.tenantLimits?.diskMiB);
    scope.disk = hostRoot;
    prepareHome(hostRoot, user);
    const limits = sessionLimits(spec.limits, sandbox.config.limits, spec.limitsMax);
    const network = spec.network ?? sandbox.config.network;
    scope.report = { sandbox: "bwrap", network, limits };
    const containmentProcs = this.containment.open(key, id);
    const limitProcs = sandbox.limits.open(id, tenantGroup(tenant), limits, containmentProcs ? join(containmentProcs, "..") : null);
    const cgroupProcs = [...(containmentProcs ? [containmentProcs] : []), ...limitProcs];
    if (network === "egress") scope.network = new EgressNetwork(sandbox.fifos.take(), sandbox.network);
    const enter = folders.target === folders.root ? null : folders.target;
    const inner = dropStep(sandbox.setpriv, user, sessionStep({ env, enter, command: spec.command, args }));
    const { args: bwrapArgs, data, files } = sandboxCommand({
      bwrap: sandbox.bwrap,
      workspace: hostRoot,
      tmpMiB: sandbox.config.tmpMiB,
      network,
      bashInit: this.bashInit,
      user,
      seccomp: sandbox.seccomp,
      // The host's addresses as they are now: an interface added since the runner started counts too.
      egressRules: scope.network ? egressRules(sandbox.config.denyCidrs, hostAddresses()) : null,
      ptys: sandbox.config.ptys,
      empty: sandbox.empty,
      command: inner,
    });
    const launch = rootStep(keyringStep(sandbox.python, bwrapArgs), cgroupProcs, data, scope.network?.rootEnv(), files);
    return { command: launch.command, args: launch.args, cwd: "/", env: launch.env, terminalOwner, shellIntegration };
  }

  /** The session's first process is running as `pid`: an egress network is set up for it now. */
  started(key: string, pid: number): void {
    this.containment.started(key, pid);
    const network = this.scopes.get(key)?.network;
    if (!network) return;
    network.attach(pid).catch((error: unknown) => {
      if (!this.scopes.has(key)) return; // ended meanwhile
      log.warn("session.network", { key, outcome: "failed", error: error instanceof Error ? error.message : String(error) });
      this.end(key); // the session's process dies with its sandbox; its exit is reported as usual
    });
  }

  /**
   * Whether the session's sandbox holds its command until allow(key) (an egress network's "go"),
   * so that the sandbox may be set up while the session's link is dialled: nothing of the
   * request runs before allow.
   */
  holdsCommand(spec: SpawnSpec): boolean {
    return this.sandbox !== null && (spec.network ?? this.sandbox.config.network) === "egress";
  }

  /** The session's link is open: a command its sandbox holds may run (once its network is ready). */
  allow(key: string): void {
    this.scopes.get(key)?.network?.allow();
  }

  /** What the session got (its Session record's sandbox, network and limits). */
  report(key: string): SandboxReport {
    return this.scopes.get(key)?.report ?? { sandbox: this.kind };
  }

  /**
   * The session's own leader, whose first process is `pid`: inside a sandbox, the session's
   * command (the child of the sandbox's init), so that a SIGHUP reaches the shell as it would
   * without one; else `pid`. Read from /proc: a candidate that signals.ts checks, never
   * signalled as it is.
   */
  private leader(key: string, pid: number): number {
    if (!this.sandbox || !this.scopes.has(key)) return pid;
    const init = firstChild(pid);
    return (init !== null ? firstChild(init) : null) ?? pid;
  }

  /**
   * Sends `signal` to the processes of the session `key` (first process `pid`) whose process
   * group is `group` (the terminal's foreground group, or a pipe session's own), else to the
   * session's leader alone; `group` -1: the leader alone (runner/isolation/signals.ts). Only the
   * session's own processes can get it. Signals of one session go in the order asked.
   */
  signal(key: string, pid: number, group: number, signal: string): Promise<void> {
    const membership = this.containment.membership(key);
    if (!membership) return Promise.resolve(); // not started, or ended: nothing of it to signal
    if (!this.signals) {
      this.signalUnchecked(key, pid, group, signal);
      return Promise.resolve();
    }
    return this.signals.send({ signal, group, leader: this.leader(key, pid), membership }).then(
      (outcome) => log.debug("session.signal", { key, signal, ...outcome }),
      (error: unknown) => log.warn("session.signal", { key, signal, outcome: "failed", error: error instanceof Error ? error.message : String(error) }),
    );
  }

  /**
   * A runner that is not root and has no python3: the session runs as the runner's own user,
   * so a signal that lands elsewhere gains it nothing it could not do itself. The members are
   * checked, without pidfds.
   */
  private signalUnchecked(key: string, pid: number, group: number, signal: string): void {
    const members = group > 0 ? sessionMembers(pid).filter((member) => Number(statFields(member)?.[2]) === group) : [];
    let sent = 0;
    for (const member of members) {
      try {
        process.kill(member, signal);
        sent++;
      } catch {
        // gone meanwhile
      }
    }
    try {
      if (sent === 0) process.kill(this.leader(key, pid), signal);
    } catch (error) {
      log.warn("session.signal", { key, signal, error });
    }
  }

  /**
   * The session's exit as the edge reports it. Inside a sandbox, the sandbox's init reports a
   * command killed by signal N as exit code 128+N (as a shell's `$?` does): it is told as that
   * signal. A kill by the memory limit is reason "oom".
   */
  exit(key: string, exit: ProcessExit): { exit: ProcessExit; oom: boolean } {
    if (!this.sandbox) return { exit, oom: false };
    const scope = this.scopes.get(key);
    // Ended before its exit came (a kill with no grace): what end() saw of the memory limit.
    const oom = scope ? this.sandbox.limits.oomKilled(scope.id) : (this.endedOom.get(key) ?? false);
    this.endedOom.delete(key);
    const code = exit.exitCode;
    if (code !== null && code > 128 && SIGNAL_NAMES.has(code - 128)) {
      return { exit: { exitCode: null, signal: SIGNAL_NAMES.get(code - 128) ?? null }, oom };
    }
    return { exit, oom };
  }

  /** Ends every process of the session (see Containment.end) and lets go of its network and limits. */
  end(key: string): void {
    this.containment.end(key);
    const scope = this.scopes.get(key);
    if (!scope) return;
    this.scopes.delete(key);
    scope.network?.close();
    if (this.sandbox) {
      if (scope.disk) this.sandbox.disks.release(scope.disk);
      const limits = this.sandbox.limits;
      // Read before the groups go: the exit may come after this (exit() takes it then).
      this.endedOom.set(key, limits.oomKilled(scope.id));
      if (this.endedOom.size > ENDED_KEPT) this.endedOom.delete(this.endedOom.keys().next().value as string);
      void limits.end(scope.id).catch((error: unknown) => log.warn("session.limits", { key, outcome: "end_failed", error }));
    }
  }

  async close(): Promise<void> {
    for (const key of [...this.scopes.keys()]) this.end(key);
    this.signals?.close();
    await this.containment.close();
    if (this.sandbox) {
      await this.sandbox.limits.close();
      this.sandbox.disks.close();
      this.sandbox.fifos.close();
      rmSync(this.sandbox.folder, { recursive: true, force: true });
    }
  }
}

/**
 * The limits a session gets: what it asked for, else the runner's defaults, lowered to the
 * tenant's maxima (`max`, from the admin API) where a default is above them. What was asked for
 * the edge has already held to those maxima.
 */
export function sessionLimits(
  asked: Partial<SessionLimits> | undefined,
  defaults: SessionLimits,
  max: Partial<SessionLimits> = {},
): SessionLimits {
  const pick = (name: keyof SessionLimits) => asked?.[name] ?? Math.min(defaults[name], max[name] ?? Number.POSITIVE_INFINITY);
  return { memoryMiB: pick("memoryMiB"), pids: pick("pids"), cpus: pick("cpus") };
}

/** The tenant's cgroup (its sessions share one CPU weight): as opaque as its user's name. */
function tenantGroup(tenant: string): string {
  return tenantUserName(tenant).replace(/^ptyb-/, "t");
}

/** The integration file, written now; null (sessions start without it, as `bash -l`) if it cannot be. */
function shellIntegrationFile(workspace: string): string | null {
  try {
    return installShellIntegration(workspace);
  } catch (error) {
    log.warn("runner.shell_integration", { outcome: "unavailable", workspace, error });
    return null;
  }
}

let current: Isolation | undefined;

/** Sets up the boundaries for this runner process; call once, before any session starts. */
export async function startIsolation(config: RunnerConfig): Promise<Isolation> {
  current = await Isolation.start(config);
  return current;
}

/** The runner's boundaries (set up by startIsolation at start). */
export function isolation(): Isolation {
  if (!current) throw new Error("isolation not started: call startIsolation() at the runner's start");
  return current;
}

