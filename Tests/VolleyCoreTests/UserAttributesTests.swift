import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Suite(.tags(.unit)) struct UserAttributesTests {
    @Test func aUsersAttributesMustBeNamesATemplateCanUseWithinTheLimits() {
        #expect(UserAttributes.problems(["first_name": "Ada", "last-name": "L", "c1": ""]).isEmpty)
        #expect(
            UserAttributes.problems(["first name": "Ada"]) == [
                "attributes.first name: a key is 1–64 letters, digits, '_' and '-'"
            ])
        #expect(UserAttributes.problems(["a.b": "x"]).first?.hasPrefix("attributes.a.b:") == true)
        #expect(UserAttributes.problems([String(repeating: "k", count: 65): "x"]).count == 1)
        // Characters as JSON Schema's maxLength counts them (code points): 512 of `é` (1,024 bytes) pass, 513 not.
        #expect(UserAttributes.problems(["k": String(repeating: "é", count: 512)]).isEmpty)
        #expect(
            UserAttributes.problems(["k": String(repeating: "é", count: 513)]) == [
                "attributes.k: 513 characters; at most 512"
            ])
        // A flag is one Character but two code points: counted as two, as the OpenAPI document counts it.
        #expect(UserAttributes.problems(["k": String(repeating: "🇵🇹", count: 256)]).isEmpty)
        #expect(UserAttributes.problems(["k": String(repeating: "🇵🇹", count: 256) + "x"]).count == 1)
        let many = Dictionary(uniqueKeysWithValues: (0...32).map { ("k\($0)", "v") })
        #expect(UserAttributes.problems(many) == ["attributes: 33 keys; at most 32"])
    }

    @Test func onlyUsersCarryAttributes() throws {
        let user = DirectoryRecord(org: "o", kind: .user, id: "u", attributes: ["first name": "x"])
        #expect(user.problems() == ["attributes.first name: a key is 1–64 letters, digits, '_' and '-' (id u)"])
        let group = DirectoryRecord(org: "o", kind: .group, id: "g", members: ["u"], attributes: [:])
        #expect(group.problems() == ["attributes: only users have attributes (id g)"])
        let line = #"{"org":"o","kind":"user","id":"u","attributes":{"first_name":"Ada"}}"#
        let decoded = try JSONDecoder().decode(DirectoryRecord.self, from: Data(line.utf8))
        #expect(decoded.attributes == ["first_name": "Ada"])
        #expect(decoded.problems().isEmpty)
        #expect(DirectoryRecord.keys.contains("attributes"))
    }
}
