import Foundation
import VolleyCore

/// Salesforce's `customNotificationAction` invocable action: decoding, validation and the result shapes.
/// Pure: the service looks the type up and writes the job.
public enum CustomNotificationAction {
    public static let actionName = "customNotificationAction"
    public static let successMessage = "Your custom notification is processed successfully."
    public static let maxTitle = InboxNotification.maxTitle // 250
    public static let maxBody = InboxNotification.maxBody // 750
    public static let maxRecipients = PushJob.maxRecipients // 500
    /// Inputs per call (Salesforce processes invocable actions in batches of 200).
    public static let maxInputs = 200

    static let bodyKeys: Set<String> = ["inputs"]
    static let inputKeys: Set<String> = [
        "customNotifTypeId", "recipientIds", "senderId", "title", "body", "targetId", "targetPageRef",
    ]

    /// One valid input.
    public struct Input: Sendable, Hashable {
        public var customNotifTypeId: String
        public var recipientIds: [RecipientID]
        public var senderId: String?
        public var title: String
        public var body: String
        public var targetId: String?
        /// JSON text (an object given as JSON is kept as its text).
        public var targetPageRef: String?
    }

    /// One error of an input: Salesforce's `{"statusCode", "message", "fields"}`.
    public struct InputError: Sendable, Hashable, Codable {
        public var statusCode: String
        public var message: String
        public var fields: [String]
        public init(_ statusCode: String, _ message: String, fields: [String]) {
            self.statusCode = statusCode
            self.message = message
            self.fields = fields
        }
        static func missing(_ field: String) -> InputError {
            InputError("REQUIRED_FIELD_MISSING", "Required fields are missing: [\(field)]", fields: [field])
        }
    }

    /// One element of the answer array.
    public struct Result: Sendable, Hashable, Encodable {
        public var errors: [InputError]?
        public var isSuccess: Bool { errors == nil }

        public static let success = Result(errors: nil)

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Key.self)
            try c.encode(CustomNotificationAction.actionName, forKey: .actionName)
            if let errors { try c.encode(errors, forKey: .errors) } else { try c.encodeNil(forKey: .errors) }
            try c.encode(isSuccess, forKey: .isSuccess)
            if isSuccess {
                try c.encode(["SuccessMessage": CustomNotificationAction.successMessage], forKey: .outputValues)
            } else {
                try c.encodeNil(forKey: .outputValues)
            }
        }
        enum Key: String, CodingKey { case actionName, errors, isSuccess, outputValues }
    }

    /// The body's inputs, each still raw: a body that is not `{"inputs": [ … ]}` fails as a whole.
    public static func inputs(_ body: Data) throws(ConnectError) -> [JSONValue] {
        let o = try ConnectJSON.object(body, allowed: bodyKeys)
        guard let raw = o["inputs"] else { throw .invalidInput("inputs: required (an array of inputs)") }
        guard case .array(let inputs) = raw else { throw .invalidInput("inputs: expected an array of inputs") }
        if inputs.isEmpty { throw .invalidInput("inputs: give at least one input") }
        if inputs.count > maxInputs {
            throw .invalidInput("inputs: at most \(maxInputs) inputs per call (got \(inputs.count))")
        }
        return inputs
    }

    /// One input, decoded: valid, or every problem found, each naming its field.
    public enum Decoded: Sendable, Hashable {
        case valid(Input)
        case invalid([InputError])
    }

    /// Validates one input. Every problem is reported, each naming its field.
    public static func decode(_ raw: JSONValue) -> Decoded {
        guard case .object(let o) = raw else {
            return .invalid([
                InputError("INVALID_INPUT", "inputs: each input must be a JSON object", fields: ["inputs"])
            ])
        }
        var errors: [InputError] = []
        for key in o.keys.sorted() where !inputKeys.contains(key) {
            errors.append(InputError("INVALID_INPUT", "Unrecognized input \"\(key)\"", fields: [key]))
        }
        func text(_ field: String) -> String? {
            switch o[field] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            default:
                errors.append(InputError("INVALID_TYPE", "\(field): expected a string", fields: [field]))
                return nil
            }
        }
        func required(_ field: String, max: Int?) -> String? {
            let present = o[field] != nil && o[field] != .null
            guard let s = text(field) else {
                if !present { errors.append(.missing(field)) }
                return nil
            }
            if s.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                errors.append(.missing(field))
                return nil
            }
            if let max, s.count > max {
                errors.append(
                    InputError(
                        "STRING_TOO_LONG", "\(field): at most \(max) characters (got \(s.count))", fields: [field]))
                return nil
            }
            return s
        }
        let typeID = required("customNotifTypeId", max: nil)
        let title = required("title", max: maxTitle)
        let body = required("body", max: maxBody)
        let senderId = text("senderId")
        let targetId = text("targetId").flatMap { $0.isEmpty ? nil : $0 }
        var pageRef: String?
        var pageRefMalformed = false
        switch o["targetPageRef"] {
        case nil, .null?: break
        case .string(let s)?: pageRef = s.isEmpty ? nil : s
        case .object(let ref)?: pageRef = ConnectJSON.text(.object(ref))
        default:
            pageRefMalformed = true
            errors.append(
                InputError(
                    "INVALID_TYPE", "targetPageRef: expected a string or a pageReference object",
                    fields: ["targetPageRef"]))
        }
        if targetId == nil && pageRef == nil && !pageRefMalformed {
            errors.append(
                InputError(
                    "REQUIRED_FIELD_MISSING", "You must specify either a targetId or a targetPageRef",
                    fields: ["targetId", "targetPageRef"]))
        }
        let recipients = recipientIds(o["recipientIds"], errors: &errors)
        if !errors.isEmpty { return .invalid(errors) }
        guard let typeID, let title, let body, let recipients else {
            return .invalid([InputError("INVALID_INPUT", "the input is incomplete", fields: [])])
        }
        return .valid(
            Input(
                customNotifTypeId: typeID, recipientIds: recipients, senderId: senderId, title: title, body: body,
                targetId: targetId, targetPageRef: pageRef))
    }

    /// Users, groups, queues and account or opportunity teams, mixed in any order: the directory tells them apart
    /// when the job runs, so here only the list's shape is checked.
    static func recipientIds(_ v: JSONValue?, errors: inout [InputError]) -> [RecipientID]? {
        let field = "recipientIds"
        let ids: [String]
        switch v {
        case nil, .null?:
            errors.append(.missing(field))
            return nil
        case .string(let s)?: ids = [s]
        case .array(let a)?:
            var out: [String] = []
            for (i, x) in a.enumerated() {
                guard case .string(let s) = x else {
                    errors.append(InputError("INVALID_TYPE", "\(field)[\(i)]: expected a string", fields: [field]))
                    return nil
                }
                out.append(s)
            }
            ids = out
        default:
            errors.append(InputError("INVALID_TYPE", "\(field): expected an array of ids", fields: [field]))
            return nil
        }
        if ids.isEmpty {
            errors.append(.missing(field))
            return nil
        }
        if ids.count > maxRecipients {
            errors.append(
                InputError(
                    "LIMIT_EXCEEDED", "\(field): at most \(maxRecipients) recipients (got \(ids.count))",
                    fields: [field]))
            return nil
        }
        if let i = ids.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty }) {
            errors.append(InputError("INVALID_ID_FIELD", "\(field)[\(i)]: empty id", fields: [field]))
            return nil
        }
        // Duplicates are harmless (the resolution de-duplicates users) but need not travel.
        var seen = Set<String>()
        return ids.filter { seen.insert($0).inserted }.map(RecipientID.init)
    }

    /// The job an input becomes: the type's settings decide at run time whether it is pushed, stored in-app, or
    /// neither. Its id is the notification id the recipients' inboxes show.
    public static func job(_ input: Input, id: JobID, org: OrgID, app: AppName) -> PushJob {
        var n = VolleyCore.Notification(title: input.title, body: input.body, type: input.customNotifTypeId)
        n.targetId = input.targetId
        n.targetPageRef = input.targetPageRef
        return PushJob(id: id, org: org, app: app, recipients: input.recipientIds, notification: n)
    }

    /// `GET` on the action: its inputs and outputs, as Salesforce's action describe lists them.
    public static let describe = Describe()

    public struct Describe: Sendable, Encodable {
        struct Parameter: Sendable, Encodable {
            var name: String
            var label: String
            var type: String
            var required: Bool
            var maxOccurs: Int
            var description: String
        }
        var name = CustomNotificationAction.actionName
        var label = "Send Custom Notification"
        var type = "CUSTOMNOTIFICATIONACTION"
        var category = "Notification"
        var inputs: [Parameter] = [
            Parameter(
                name: "customNotifTypeId", label: "Notification Type ID", type: "REFERENCE", required: true,
                maxOccurs: 1, description: "The ID of the custom notification type."),
            Parameter(
                name: "recipientIds", label: "Recipient IDs", type: "REFERENCE", required: true,
                maxOccurs: CustomNotificationAction.maxRecipients,
                description: "Users, groups, queues, accounts (account team) or opportunities (opportunity team)."),
            Parameter(
                name: "senderId", label: "Sender ID", type: "REFERENCE", required: false, maxOccurs: 1,
                description: "The user ID of the sender."),
            Parameter(
                name: "title", label: "Notification Title", type: "STRING", required: true, maxOccurs: 1,
                description: "Title as recipients see it, at most \(CustomNotificationAction.maxTitle) characters."),
            Parameter(
                name: "body", label: "Notification Body", type: "TEXTAREA", required: true, maxOccurs: 1,
                description: "Body as recipients see it, at most \(CustomNotificationAction.maxBody) characters."),
            Parameter(
                name: "targetId", label: "Target ID", type: "REFERENCE", required: false, maxOccurs: 1,
                description: "Record the notification is about. Give targetId or targetPageRef."),
            Parameter(
                name: "targetPageRef", label: "Target Page Reference", type: "STRING", required: false,
                maxOccurs: 1, description: "PageReference (JSON) of the navigation target."),
        ]
        var outputs: [Parameter] = [
            Parameter(
                name: "SuccessMessage", label: "Success Message", type: "STRING", required: false, maxOccurs: 1,
                description: "Set when the notification was accepted.")
        ]
    }
}
