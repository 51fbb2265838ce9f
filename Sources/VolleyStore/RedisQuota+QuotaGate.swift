import VolleyCore

/// The engine's `QuotaGate` seam (issue 4) on top of the hourly store. The engine prefers `HourlyQuota`
/// (charge/settle with waits); these two keep the plain seam working. The session is not used: the quota has its
/// own connection.
extension RedisQuotaStore: QuotaGate {
    public func grant(org: OrgID, platform: Platform, count: Int, session: any PipelineSession) throws -> Int {
        try charge(org: org, platform: platform, count: count).granted
    }
    public func refund(org: OrgID, platform: Platform, count: Int, session: any PipelineSession) throws {
        try settle(org: org, platform: platform, delivered: 0, refunded: count)
    }
}
