import Foundation
import Testing
import VolleyRedis
import VolleyTestTags

@testable import VolleyService

/// Which failures `volley send --wait` rides out within its wait budget, and which it reports at once.
@Suite(.tags(.unit)) struct SendWaitRetryTests {
    @Test(arguments: [
        "XADD volley:jobs: CLUSTERDOWN The cluster is down",
        "XREAD: CLUSTERDOWN Hash slot not served",
        "XADD volley:jobs: TRYAGAIN Multiple keys request during rehashing of slot",
        "LOADING Redis is loading the dataset in memory",
        "XREVRANGE reports: MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'",
    ])
    func aFailoverAnswerIsWaitedForByReadsAndWrites(message: String) {
        let e = RedisError(.server, message)
        #expect(JobSubmission.isTransient(e, reads: true))
        #expect(JobSubmission.isTransient(e, reads: false))
    }

    @Test func aLostConnectionIsWaitedForOnlyByReads() {
        let e = RedisError(
            .connection, "connect to 127.0.0.1:7000: Connection refused (gave up after 12 attempts in 10 s)")
        #expect(JobSubmission.isTransient(e, reads: true))
        // The XADD may have run before the connection broke: it is not sent again.
        #expect(!JobSubmission.isTransient(e, reads: false))
    }

    @Test(arguments: [
        "XADD volley:jobs: NOPERM User volley-api has no permissions to run the 'xadd' command",
        "XREVRANGE reports: WRONGTYPE Operation against a key holding the wrong kind of value",
        "ERR unknown command 'XAUTOCLAIM'",
        "XADD: ERR The cluster is not CLUSTERDOWN-safe",
    ])
    func aConfigurationErrorIsReportedAtOnce(message: String) {
        #expect(!JobSubmission.isTransient(RedisError(.server, message), reads: true))
    }

    @Test func otherKindsAreReportedAtOnce() {
        #expect(!JobSubmission.isTransient(RedisError(.authentication, "AUTH failed: WRONGPASS"), reads: true))
        #expect(!JobSubmission.isTransient(RedisError(.cancelled, "shutting down"), reads: true))
        struct Other: Error {}
        #expect(!JobSubmission.isTransient(Other(), reads: true))
    }
}
