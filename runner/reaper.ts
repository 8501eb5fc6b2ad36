// Makes sure nothing a session started outlives it: every process in the session's
// terminal session (sid = the session leader's pid) gets SIGKILL.
import { readFileSync, readdirSync } from "node:fs";
import { log } from "../shared/log.js";

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
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[3]) === sid) members.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
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
