// The boundaries around sessions (docs/security.md), set up once at the runner's start and used by
// every hosted session: who a session runs as (session-user.ts), in which folder and with which
// environment (environment.ts), what holds its processes (containment.ts), and, for a login
// bash, the shell integration it starts with (runner/agent/shell-integration.ts).
import { log } from "../../shared/log.js";
import type { PoolMessage } from "../../shared/protocol.js";
import type { RunnerConfig } from "../config.js";
import { Containment } from "./containment.js";
import { sessionCwd, sessionEnv, sessionFolders } from "./environment.js";
import { lookupCommand } from "./command-lookup.js";
import { type SwitchTools, launchCommand, notRunnable, switchTools } from "./launch.js";
import { type SessionUsers, prepareHome, prepareWorkspaceRoot, sessionUsers } from "./session-user.js";
import { installShellIntegration, integratedBashArgs, isLoginBash } from "../agent/shell-integration.js";

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

export class Isolation {
  private constructor(
    private readonly workspace: string,
    private readonly users: SessionUsers,
    private readonly tools: SwitchTools | null,
    readonly containment: Containment,
    /** the shell integration's init file (readable by every session user, writable by the runner only), or null without */
    private readonly bashInit: string | null,
  ) {}

  static async start(config: RunnerConfig, isRoot = process.getuid?.() === 0): Promise<Isolation> {
    // Refuse a configuration that cannot be honoured before touching anything.
    const tools = isRoot ? switchTools() : null;
    const users = sessionUsers(config.sessionUser, config.workspace, isRoot);
    if (isRoot) prepareWorkspaceRoot(config.workspace);
    const bashInit = shellIntegrationFile(config.workspace);
    const containment = await Containment.start({ workspace: config.workspace, runnerId: config.runnerId, isRoot });
    return new Isolation(config.workspace, users, tools, containment, bashInit);
  }

  /**
   * Everything node-pty needs to start the session `key`: its user (made on the tenant's first
   * session), its folder, its environment, its cgroup. Throws (the session fails) when one of
   * them cannot be had; call end(key) then.
   */
  prepare(key: string, tenant: string, spec: SpawnSpec): SessionLaunch {
    const user = this.users.forTenant(tenant);
    const folders = sessionFolders(this.workspace, tenant, spec.cwd);
    let cwd: string;
    if (user.switched) {
      prepareHome(folders.root, user);
      cwd = folders.root; // a folder below it is made by the session's user (launch.ts)
    } else cwd = sessionCwd(this.workspace, tenant, spec.cwd);
    const env = sessionEnv(spec.env, { user: user.name, home: folders.root, shell: user.shell });
    // A command that is not there, or may not be run, ends as a shell's would (127, 126) and says so.
    const lookup = lookupCommand(spec.command, {
      path: env.PATH,
      cwd: folders.target,
      as: user.switched ? { uid: user.uid, gid: user.gid } : null,
    });
    // A login bash reads the integration file instead: the login files, then the marks.
    const bashInit = this.bashInit;
    // Only on a terminal: the marks are terminal output (pipes get the login shell as asked).
    const shellIntegration = spec.pty !== false && bashInit !== null && lookup.found && isLoginBash(spec.command, spec.args);
    const sessionArgs = shellIntegration ? integratedBashArgs(bashInit) : spec.args;
    const session = lookup.found ? { command: spec.command, args: sessionArgs } : notRunnable(lookup.message, lookup.exitCode);
    const cgroupProcs = this.containment.open(key);
    const { command, args } = launchCommand({
      command: session.command,
      args: session.args,
      user,
      tools: this.tools,
      cgroupProcs,
      enter: cwd === folders.target ? null : folders.target,
    });
    return { command, args, cwd, env, terminalOwner: user.switched ? { uid: user.uid, gid: user.gid } : undefined, shellIntegration };
  }

  /** The session's first process is running as `pid`. */
  started(key: string, pid: number): void {
    this.containment.started(key, pid);
  }

  /** Ends every process of the session (see Containment.end). */
  end(key: string): void {
    this.containment.end(key);
  }

  close(): Promise<void> {
    return this.containment.close();
  }
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
