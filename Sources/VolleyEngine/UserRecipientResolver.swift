import VolleyCore

/// Resolves a job's explicit `devices` and its `recipients` as user ids through the device registry, in chunks.
/// Recipients are de-duplicated, the ids in `exclude` left out; a token belongs to one user, so devices are not
/// repeated across users. Segments and `{"all": true}` need a directory: here they are reported as unknown.
public struct UserRecipientResolver: RecipientResolver {
    /// Users per registry round trip (one pipelined HVALS each).
    public var usersPerRead: Int
    public init(usersPerRead: Int = 100) { self.usersPerRead = max(1, usersPerRead) }
    /// Jobs of user ids are never split into shards.
    public var shards: (any ShardCoordinator)? { nil }

    /// User ids name users the registry knows and nothing more: a chunk carries no recipient facts (no inbox here,
    /// so no unseen count; no directory, so no attributes).
    public func cursor(for job: PushJob, session: any PipelineSession, needs: RecipientNeeds) throws
        -> any DeviceCursor
    {
        var seen = Set(job.exclude?.compactMap(\.recipientID) ?? [])
        let users = job.recipientIDs.filter { seen.insert($0).inserted }.map { UserID($0.rawValue) }
        let c = Cursor(job: job, users: users, registry: session, usersPerRead: usersPerRead)
        let unresolved = ((job.recipients ?? []) + (job.exclude ?? [])).filter { $0.recipientID == nil }
        c.facts.unknownRecipientIDs = unresolved.map { RecipientID($0.description) }
        return c
    }

    final class Cursor: DeviceCursor {
        let job: PushJob
        let users: [UserID]
        let registry: any DeviceRegistry
        let usersPerRead: Int
        var explicitIndex = 0
        var userIndex = 0
        var seenExplicit = Set<String>()
        /// User ids name only users: nothing more to report than the devices, and the entries that need a directory.
        var facts = RecipientFacts()

        init(job: PushJob, users: [UserID], registry: any DeviceRegistry, usersPerRead: Int) {
            self.job = job
            self.users = users
            self.registry = registry
            self.usersPerRead = usersPerRead
        }

        func next(max: Int) throws -> DeviceChunk? {
            let explicit = job.devices ?? []
            if explicitIndex < explicit.count {
                let end = min(explicit.count, explicitIndex + Swift.max(1, max))
                var out: [Device] = []
                out.reserveCapacity(end - explicitIndex)
                for d in explicit[explicitIndex..<end]
                where seenExplicit.insert("\(d.platform):\(d.token.rawValue)").inserted {
                    out.append(Device(platform: d.platform, token: d.token, environment: d.environment))
                }
                explicitIndex = end
                return DeviceChunk(devices: out)
            }
            guard userIndex < users.count else { return nil }
            let end = min(users.count, userIndex + usersPerRead)
            let batch = Array(users[userIndex..<end])
            userIndex = end
            let lists = try registry.devices(org: job.org, app: job.app, users: batch)
            var chunk = DeviceChunk(devices: [], users: batch.count)
            for (user, list) in zip(batch, lists) {
                if list.isEmpty {
                    chunk.usersWithoutDevices += 1
                    chunk.usersWithoutDevicesIDs.append(user)
                }
                chunk.devices.append(contentsOf: list)
            }
            return chunk
        }
    }
}
