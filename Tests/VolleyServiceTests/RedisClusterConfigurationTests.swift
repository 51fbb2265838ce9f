import Foundation
import Testing
import VolleyRedis
import VolleyTestTags

@testable import VolleyService

@Test(.tags(.unit)) func redisClusterSeedsBuildAClusterEndpointWithTheURLsCredentials() throws {
    let c = try VolleyConfiguration.parse(
        yaml: """
            redis:
              url: redis://alice:pw@ignored:6379/0
              cluster: [10.0.0.1:7000, "10.0.0.2:7001"]
              waitReplicas: 1
            """, baseDirectory: nil)
    #expect(c.redis.waitReplicas == 1)
    #expect(try PipelineSettings(c).store.waitReplicas == 1)
    #expect(c.redis.cluster == ["10.0.0.1:7000", "10.0.0.2:7001"])
    let e = try c.redis.endpoint()
    #expect(e.isCluster)
    #expect(
        e.clusterSeeds == [
            RedisClusterNode(host: "10.0.0.1", port: 7000), RedisClusterNode(host: "10.0.0.2", port: 7001),
        ])
    #expect(e.user == "alice")
    #expect(e.password == "pw")
    #expect(!e.description.contains("pw"))
    #expect(
        try VolleyConfiguration.parse(yaml: "redis: {url: redis://h:1/0}", baseDirectory: nil).redis.endpoint()
            .isCluster == false)
}

@Test(.tags(.unit)) func badRedisClusterSeedsAreNamed() throws {
    do {
        _ = try VolleyConfiguration.parse(yaml: "redis: {cluster: [10.0.0.1, 'h:99999']}", baseDirectory: nil)
        Issue.record("expected a ConfigurationError")
    } catch let e as ConfigurationError {
        #expect(e.problems.contains { $0.hasPrefix("redis.cluster[0]: must be host:port") })
        #expect(e.problems.contains { $0.hasPrefix("redis.cluster[1]: must be host:port") })
    }
    #expect(throws: ConfigurationError.self) {
        try VolleyConfiguration.parse(yaml: "redis: {cluster: 10.0.0.1:7000}", baseDirectory: nil)
    }
}
