// What a session's process starts with: a small base environment plus the request's `env`
// (the runner's own variables, such as RUNNER_TOKEN, never reach it), and a working
// directory inside the tenant's workspace folder.
import { mkdirSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";

const BASE_VARIABLES = ["PATH", "HOME", "LANG", "SHELL", "USER"] as const;

export function sessionEnv(requested: Record<string, string>, runnerEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of BASE_VARIABLES) {
    const value = runnerEnv[name];
    if (value !== undefined) env[name] = value;
  }
  env.PATH ??= "/usr/local/bin:/usr/bin:/bin";
  env.LANG ??= "C.UTF-8";
  env.TERM = "xterm-256color";
  return { ...env, ...requested };
}

export class CwdOutsideWorkspace extends Error {}

/**
 * The tenant's workspace folder (created on demand) and the session's cwd resolved inside it.
 * A relative `cwd` is taken from the workspace; a path that leaves it is refused.
 */
export function sessionCwd(workspace: string, tenant: string, cwd: string | null): string {
  const root = resolve(workspace, tenant);
  const target = cwd === null ? root : resolve(root, cwd);
  const rel = relative(root, target);
  if (rel.startsWith("..") || isAbsolute(rel)) {
    throw new CwdOutsideWorkspace(`cwd ${cwd} is outside the tenant's workspace`);
  }
  mkdirSync(target, { recursive: true });
  return target;
}
