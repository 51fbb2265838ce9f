import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyService

/// `orgs[].frequencyCaps`: read per org, reaching the worker's rules and the API's configuration; every fault stops
/// startup naming its key.
@Suite(.tags(.unit)) struct FrequencyCapConfigurationTests {
    @Test func capsAreReadPerOrgAndReachTheAPI() throws {
        let c = try VolleyConfiguration.parse(
            yaml: """
                orgs:
                  - id: 00Dorg1
                    frequencyCaps:
                      - {window: 1h, max: 3}
                      - {window: 24h, max: 10}
                      - {window: 1h, max: 1, type: ORDER_SHIPPED}
                  - id: 00Dorg2
                """, baseDirectory: nil)
        let rules = try #require(c.frequencyCaps["00Dorg1"])
        #expect(rules.map(\.window.seconds) == [3600, 86_400, 3600])
        #expect(rules.map(\.max) == [3, 10, 1])
        #expect(rules.map(\.type) == [nil, nil, "ORDER_SHIPPED"])
        #expect(c.frequencyCaps["00Dorg2"] == nil)
        #expect(try c.apiConfiguration().frequencyCaps == c.frequencyCaps)
        #expect(try VolleyConfiguration.parse(yaml: "", baseDirectory: nil).frequencyCaps.isEmpty)
    }

    @Test func badCapsStopStartupNamingTheKey() throws {
        do {
            _ = try VolleyConfiguration.parse(
                yaml: """
                    orgs:
                      - id: a
                        frequencyCaps:
                          - {window: 1 hour, max: 3}
                      - id: b
                        frequencyCaps:
                          - {window: 1h, max: many}
                      - id: c
                        frequencyCaps:
                          - {window: 1h, max: 1}
                          - {window: 60m, max: 2}
                      - id: d
                        frequencyCap: []
                      - frequencyCaps: []
                      - id: a
                    """, baseDirectory: nil)
            Issue.record("expected a configuration error")
        } catch let e as ConfigurationError {
            #expect(e.problems.contains { $0.hasPrefix("orgs[0].frequencyCaps[0].window: ") })
            #expect(e.problems.contains { $0.hasPrefix("orgs[1].frequencyCaps[0].max: ") })
            #expect(e.problems.contains { $0.hasPrefix("orgs[2].frequencyCaps[1]: a second rule") })
            #expect(e.problems.contains { $0.hasPrefix("orgs[3].frequencyCap: unknown key") })
            #expect(e.problems.contains { $0.hasPrefix("orgs[4].id: ") })
            #expect(e.problems.contains { $0.hasPrefix("orgs[5].id: duplicate org id 'a'") })
        }
        #expect(throws: ConfigurationError.self) {
            try VolleyConfiguration.parse(yaml: "orgs: {a: 1}", baseDirectory: nil)
        }
    }
}
