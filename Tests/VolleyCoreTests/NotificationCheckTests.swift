import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Suite(.tags(.unit)) struct NotificationCheckTests {
    /// A check that refuses a negative ttl on iOS only, recording what it was asked.
    final class Recorder: @unchecked Sendable {
        var asked: [(AppName, Platform)] = []
        let lock = NSLock()
        lazy var check = NotificationCheck { [unowned self] app, platform, n, _ in
            self.lock.withLock { self.asked.append((app, platform)) }
            if platform == .ios, let ttl = n.ttl, ttl < 0 {
                throw NotificationError("BadExpirationDate", "ttl \(ttl) must be 0 or more seconds", field: "ttl")
            }
        }
    }

    func job(_ n: VolleyCore.Notification, platforms: [Platform]? = nil) -> PushJob {
        PushJob(id: "j", org: "o", app: "a", recipients: ["u"], notification: n, platforms: platforms)
    }

    @Test func theFirstRefusalOnATargetedPlatformIsReturned() throws {
        let r = Recorder()
        let refusal = try #require(r.check.refusal(of: job(.init(title: "x", ttl: -1))))
        #expect(refusal.platform == .ios)
        #expect(refusal.error.field == "ttl")
        #expect(r.asked.map(\.1) == [.ios])
    }

    @Test func platformsTheJobDoesNotTargetAreNotChecked() {
        let r = Recorder()
        #expect(r.check.refusal(of: job(.init(title: "x", ttl: -1), platforms: [.android])) == nil)
        #expect(r.asked.map(\.1) == [.android])
        #expect(r.asked.map(\.0) == ["a"])
    }

    @Test func aNotificationEveryProviderPreparesPasses() {
        let r = Recorder()
        #expect(r.check.refusal(of: job(.init(title: "x", ttl: 60))) == nil)
        #expect(r.asked.map(\.1) == [.ios, .android])
        #expect(NotificationCheck.none.refusal(of: job(.init(title: "x", ttl: -1))) == nil)
    }

    /// A template is checked for every platform of each app, rendered as the job door renders a templated job's
    /// (no attributes, no custom data); no app, no check.
    @Test func aTemplateIsRenderedAndCheckedForEveryPlatformOfEachApp() throws {
        let r = Recorder()
        let good = try NotificationTemplate(.init(title: "Hi {{ first_name | 'Friend' }}", ttl: 60))
        #expect(r.check.refusal(ofTemplate: good, apps: ["a", "b"]) == nil)
        #expect(r.asked.map { "\($0.0) \($0.1)" } == ["a ios", "a android", "b ios", "b android"])

        let bad = try NotificationTemplate(.init(title: "Hi {{ first_name }}", ttl: -1))
        let refusal = try #require(r.check.refusal(ofTemplate: bad, apps: ["a", "b"]))
        #expect(refusal.app == "a" && refusal.platform == .ios && refusal.error.field == "ttl")
        #expect(r.check.refusal(ofTemplate: bad, apps: []) == nil)
    }
}
