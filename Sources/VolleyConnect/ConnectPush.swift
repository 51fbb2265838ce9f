import Foundation
import VolleyCore

/// Salesforce's Connect REST push resource (`POST /connect/notifications/push`): decoding, validation and the job.
public enum ConnectPush {
    static let keys: Set<String> = ["appName", "namespace", "userIds", "payload"]
    public static let maxUsers = PushJob.maxRecipients
    /// APNs takes at most 4 KB of payload and FCM 4 KB of data: a bigger payload could reach no device.
    public static let maxPayloadBytes = 4096

    public struct Request: Sendable, Hashable {
        public var appName: AppName
        public var namespace: String?
        public var userIds: [UserID]
        /// The platform payload as a JSON object.
        public var payload: [String: JSONValue]
    }

    public static func decode(_ body: Data) throws(ConnectError) -> Request {
        let o = try ConnectJSON.object(body, allowed: keys)
        guard let app = try ConnectJSON.string(o["appName"], field: "appName"), !app.isEmpty else {
            throw .invalidInput("appName: required (the API name of the connected app)")
        }
        let namespace = try ConnectJSON.string(o["namespace"], field: "namespace")
        guard let users = try ConnectJSON.stringList(o["userIds"], field: "userIds"), !users.isEmpty else {
            throw .invalidInput("userIds: required (at least one user id)")
        }
        if users.count > maxUsers {
            throw .invalidInput("userIds: at most \(maxUsers) user ids per push (got \(users.count))")
        }
        let payload: JSONValue
        switch o["payload"] {
        case nil, .null?: throw .invalidInput("payload: required (the push payload as a JSON string)")
        case .string(let text)?:
            guard let v = ConnectJSON.payload(text) else {
                throw .invalidInput("payload: must be in a valid JSON format")
            }
            payload = v
        case .object(let obj)?: payload = .object(obj)
        default: throw .invalidInput("payload: expected a string holding a JSON object")
        }
        guard case .object(let fields) = payload else {
            throw .invalidInput("payload: must be a JSON object")
        }
        if fields.isEmpty { throw .invalidInput("payload: must hold at least one key (for example aps)") }
        let bytes = ConnectJSON.text(payload).utf8.count
        if bytes > maxPayloadBytes {
            throw .invalidInput("payload: exceeds maximum size (\(bytes) bytes; at most \(maxPayloadBytes))")
        }
        if let aps = fields["aps"], aps.objectValue == nil {
            throw .invalidInput("payload: aps must be a JSON object")
        }
        var seen = Set<String>()
        return Request(
            appName: AppName(app), namespace: namespace?.isEmpty == true ? nil : namespace,
            userIds: users.filter { seen.insert($0).inserted }.map(UserID.init), payload: fields)
    }

    /// The job a push becomes. With `aps`, the payload is the whole APNs payload for iOS devices; for Android its
    /// keys become FCM `data` (strings; objects such as `aps` as their JSON), like the guide's Android map. Without
    /// `aps` only Android devices are targeted: an iOS payload without `aps` shows nothing.
    public static func job(_ request: Request, id: JobID, org: OrgID) -> PushJob {
        var data: [String: JSONValue] = [:]
        for (k, v) in request.payload { data[k] = .string(ConnectJSON.text(v)) }
        let hasAPS = request.payload["aps"] != nil
        return PushJob(
            id: id, org: org, app: request.appName,
            recipients: request.userIds.map { RecipientID($0.rawValue) }, notification: VolleyCore.Notification(),
            apns: hasAPS ? .object(request.payload) : nil, fcm: .object(["data": .object(data)]),
            platforms: hasAPS ? nil : [.android])
    }
}
