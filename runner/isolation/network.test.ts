// The egress sandbox's nftables rules (network.ts, egressRules), read as text: what the session
// may reach (its loopback, slirp's resolver on port 53) comes before what it may not (slirp's own
// network, SESSION_DENY_CIDRS, every address of the runner's host), and nothing is left out.
import { describe, expect, it } from "vitest";
import { egressRules } from "./network.js";
import { SANDBOX_RESOLVER } from "./sandbox.js";

const lines = (rules: string) => rules.split("\n").map((line) => line.trim());

describe("egressRules", () => {
  const deny = ["10.0.0.0/8", "192.168.0.0/16", "fc00::/7"];
  const host = ["203.0.113.7/32", "2001:db8::7/128"];
  const rules = lines(egressRules(deny, host));

  it("rejects slirp's network, each deny CIDR and each host address, IPv4 and IPv6 by their family", () => {
    expect(rules).toContain("ip daddr 10.0.2.0/24 reject");
    for (const cidr of ["10.0.0.0/8", "192.168.0.0/16", "203.0.113.7/32"]) expect(rules).toContain(`ip daddr ${cidr} reject`);
    for (const cidr of ["fc00::/7", "2001:db8::7/128"]) expect(rules).toContain(`ip6 daddr ${cidr} reject`);
    expect(rules.filter((line) => line.endsWith(" reject"))).toHaveLength(1 + deny.length + host.length);
  });

  it("lets loopback and the resolver's port 53 through before any reject, in an output chain that accepts the rest", () => {
    const firstReject = rules.findIndex((line) => line.endsWith(" reject"));
    for (const allowed of ['oifname "lo" accept', `ip daddr ${SANDBOX_RESOLVER} udp dport 53 accept`, `ip daddr ${SANDBOX_RESOLVER} tcp dport 53 accept`]) {
      const at = rules.indexOf(allowed);
      expect(at, allowed).toBeGreaterThan(-1);
      expect(at, allowed).toBeLessThan(firstReject);
    }
    expect(rules).toContain("type filter hook output priority 0; policy accept;");
    // Only the resolver is let through on slirp's network, and only its DNS port.
    expect(rules.filter((line) => line.includes(SANDBOX_RESOLVER))).toHaveLength(2);
  });

  it("with no deny list and no host address still rejects slirp's network", () => {
    expect(lines(egressRules([], [])).filter((line) => line.endsWith(" reject"))).toEqual(["ip daddr 10.0.2.0/24 reject"]);
  });
});
