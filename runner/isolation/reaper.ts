// The fallback containment (runner/isolation/containment.ts, where the runner cannot use cgroups):
// every process in the session's terminal session (sid = the session leader's pid) gets SIGKILL. A
// process that called setsid() is in another terminal session and escapes it.
import { readdirSync } from "node:fs";
import { log } from "../../shared/log.js";
import { statFields } from "../process/proc.js";

/** Pids whose session id is `sid`, read from /proc (Linux). */
export function sessionMembers(sid: number): number[] {
  const members: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return members;
  }
  for (const entry of entries) {
    if (/^\d+$/.test(entry) && Number(statFields(Number(entry))?.[3]) === sid) members.push(Number(entry));
  }
  return members;
}

export function killSessionProcesses(sid: number): void {
  for (const pid of sessionMembers(sid)) {
    try {
      process.kill(pid, "SIGKILL");
      log.debug("reaper.kill", { sid, pid });
    } catch {
      // already gone
    }
  }
}
