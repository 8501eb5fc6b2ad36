// `ptybroker runner-credential`: a runner's own credential, signed locally with RUNNER_SECRET
// (docs/security.md, "Credentials"); it asks nothing of the broker.
import { parseArgs } from "node:util";
import { mintRunnerCredential, runnerClaimsProblem } from "../../shared/runner-credential.js";
import { UsageError } from "./common.js";

export async function runnerCredential(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { id: { type: "string" }, tenants: { type: "string" } } });
  const secret = process.env.RUNNER_SECRET;
  if (!secret) throw new UsageError("set RUNNER_SECRET: the edge's secret that signs runner credentials");
  if (!values.id) throw new UsageError("--id is required: the runner's id");
  const tenants = values.tenants === undefined ? null : values.tenants.split(",").map((t) => t.trim());
  const claims = { runnerId: values.id, tenants };
  const problem = runnerClaimsProblem(claims);
  if (problem) throw new UsageError(problem);
  process.stdout.write(`${await mintRunnerCredential(secret, claims)}\n`);
  process.stderr.write(`runner ${values.id}, ${tenants ? `tenants ${tenants.join(", ")}` : "any tenant"}\n`);
  return 0;
}
