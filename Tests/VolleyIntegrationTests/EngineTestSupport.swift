import Foundation
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport

struct EngineHarness {
    let redis: RedisServerFixture
    let store: StoreConfiguration
    let producer: JobProducer
    let admin: RedisPipelineSession

    init(persistent: Bool = false, streamShards: Int = 1, redisArguments: [String] = [], tls: Bool = false) throws {
        var store = StoreConfiguration()
        store.streamShards = streamShards
        self.store = store
        redis = try RedisServerFixture(extraArguments: redisArguments, persistent: persistent, tls: tls)
        producer = JobProducer(client: redis.client(name: "producer"), store: store)
        admin = RedisPipelineBackend(
            endpoint: redis.endpoint, store: store, consumer: "admin",
            options: .init(giveUpAfter: 10)
        ).makeRedisSession(name: "admin")
    }

    func worker(
        _ apps: [AppName: [Platform: any PushSender]], orgs: [AppName: AppOrgs] = [:], consumer: String = "w1",
        configure: (inout WorkerConfiguration) -> Void = { _ in }
    ) -> PipelineWorker {
        var c = WorkerConfiguration(
            consumer: consumer, concurrentJobs: 2, inFlight: 200, blockMillis: 100,
            reclaimIdleMillis: 60_000, reclaimIntervalMillis: 200, maxDeliveries: 5,
            drainDeadlineSeconds: 5, recordBatch: 100, chunkSize: 250)
        configure(&c)
        let backend = RedisPipelineBackend(
            endpoint: redis.endpoint, store: store, consumer: c.consumer,
            options: .init(giveUpAfter: 30))
        return PipelineWorker(configuration: c, backend: backend, apps: StaticAppDirectory(apps, orgs: orgs))
    }

    func register(
        org: OrgID = "org1", app: AppName = "app1", users: Int, devicesPerUser: Int,
        platform: (Int) -> Platform = { $0 % 2 == 0 ? .ios : .android },
        token: (Int, Int) -> String = { u, d in "tok-u\(u)-d\(d)-" + String(repeating: "a", count: 16) }
    ) throws {
        var recs: [DeviceImportRecord] = []
        for u in 0..<users {
            for d in 0..<devicesPerUser {
                recs.append(
                    DeviceImportRecord(
                        org: org, app: app, user: UserID("user\(u)"),
                        platform: platform(u * devicesPerUser + d), token: DeviceToken(token(u, d))))
            }
        }
        try admin.register(recs)
    }

    func report(for job: JobID) throws -> JobReport? {
        try producer.allReports().first { $0.job == job }
    }

    /// Ledger entries of a job (platform:token → encoded outcome): the hash's, and `a` for each device of the
    /// accepted list (parsed here with plain string handling, independently of the store's own parser).
    func ledger(org: OrgID = "org1", job: JobID) throws -> [String: String] {
        let r = try admin.client.checked(["HGETALL", "volley:outcomes:{\(org)}:\(job)"])
        var d: [String: String] = [:]
        for (k, v) in r.fieldPairs where !k.hasPrefix("_") { d[k] = v }
        let list = try admin.client.checked(["LRANGE", "volley:outcomes:{\(org)}:\(job):accepted", "0", "-1"])
        for element in list.array ?? [] {
            for line in (element.string ?? "").split(separator: "\n") {
                guard let colon = line.firstIndex(of: ":"), let n = Int(line[..<colon]) else { continue }
                let field = String(line[line.index(after: colon)...])
                // The same device may appear twice: a batch whose reply was lost with the connection is pushed again.
                guard field.utf8.count == n else {
                    throw RedisError(.unexpectedReply, "accepted-list entry \(line): wrong length")
                }
                d[field] = "a"
            }
        }
        return d
    }
}

func explicitDevices(_ n: Int, prefix: String = "dev") -> [JobDevice] {
    (0..<n).map { i in
        JobDevice(
            platform: i % 2 == 0 ? .ios : .android,
            token: DeviceToken("\(prefix)-\(i)-" + String(repeating: "b", count: 20)))
    }
}
