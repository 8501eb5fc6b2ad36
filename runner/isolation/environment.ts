// What a session's process starts with: a small fixed environment naming its user and home,
// plus the request's `env` (none of the runner's own variables, such as RUNNER_TOKEN or
// REDIS_URL, reach it), and a working directory inside the tenant's workspace folder.
import { mkdirSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";

const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";

export interface SessionIdentity {
  /** the user the session runs as */
  user: string;
  /** the tenant's workspace folder */
  home: string;
  shell: string;
}

export function sessionEnv(requested: Record<string, string>, identity: SessionIdentity): Record<string, string> {
  const env: Record<string, string> = {
    PATH: DEFAULT_PATH,
    LANG: "C.UTF-8",
    HOME: identity.home,
    USER: identity.user,
    LOGNAME: identity.user,
    SHELL: identity.shell,
    TERM: "xterm-256color",
  };
  return { ...env, ...requested };
}

export class CwdOutsideWorkspace extends Error {}

export interface SessionFolders {
  /** the tenant's workspace folder (its user's home) */
  root: string;
  /** the session's working directory, `root` or a folder below it */
  target: string;
}

/**
 * The session's cwd resolved inside the tenant's workspace folder `root` (on the host, or
 * /workspace inside a sandbox), by name only (nothing is made). A relative `cwd` is taken from
 * the workspace; a path that leaves it is refused.
 */
export function sessionFolders(root: string, cwd: string | null): SessionFolders {
  const target = cwd === null ? root : resolve(root, cwd);
  const rel = relative(root, target);
  if (rel.startsWith("..") || isAbsolute(rel)) {
    throw new CwdOutsideWorkspace(`cwd ${cwd} is outside the tenant's workspace`);
  }
  return { root, target };
}

/** sessionFolders(), with the cwd made by the runner (only when sessions run as the runner's own user). */
export function sessionCwd(root: string, cwd: string | null): string {
  const { target } = sessionFolders(root, cwd);
  mkdirSync(target, { recursive: true });
  return target;
}
