// The commands a session's shell ran (docs/protocol.md §3, "Agents"), as the runner reports them
// (OSC 133 C…D): numbered in the order they arrive, each `from` kept once (the runner sends
// recent ones again after a link drops), the newest MAX_COMMANDS_KEPT kept. In the session
// object's SQLite storage, so the list outlives the runner and the object's hibernation.
import { type CommandRecord, MAX_COMMANDS_KEPT } from "../../shared/agent.js";

export type ReportedCommand = Omit<CommandRecord, "seq">;

export class CommandLog {
  constructor(private readonly sql: SqlStorage) {}

  /** Stores a reported command; returns it numbered, or null when it was stored before. */
  add(command: ReportedCommand): CommandRecord | null {
    this.ensure();
    const seen = this.sql.exec("SELECT 1 FROM commands WHERE start = ?", command.from).toArray();
    if (seen.length > 0) return null;
    const last = this.sql.exec<{ seq: number | null }>("SELECT MAX(seq) AS seq FROM commands").one().seq ?? 0;
    const record: CommandRecord = { seq: last + 1, ...command };
    this.sql.exec("INSERT INTO commands (seq, start, json) VALUES (?, ?, ?)", record.seq, record.from, JSON.stringify(record));
    this.sql.exec("DELETE FROM commands WHERE seq <= ?", record.seq - MAX_COMMANDS_KEPT);
    return record;
  }

  /** The newest `limit` commands, oldest first. */
  list(limit: number): CommandRecord[] {
    this.ensure();
    const rows = this.sql.exec<{ json: string }>("SELECT json FROM (SELECT seq, json FROM commands ORDER BY seq DESC LIMIT ?) ORDER BY seq", limit).toArray();
    return rows.map((row) => JSON.parse(row.json) as CommandRecord);
  }

  /** Storage may have been wiped (deleteAll on purge): the table is made again when needed. */
  private ensure(): void {
    this.sql.exec("CREATE TABLE IF NOT EXISTS commands (seq INTEGER PRIMARY KEY, start INTEGER NOT NULL UNIQUE, json TEXT NOT NULL)");
  }
}
