import Foundation
import Logging
import Testing
import VolleyConnect
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags
import Yams

@testable import VolleyAPI

/// The served document describes exactly the routes the server has: every (method, path) the router registers,
/// with the Salesforce-compatible resources taken from the table `ConnectService` routes by.
@Suite(.tags(.unit))
struct OpenAPIDocumentTests {
    static let methods: Set<String> = ["get", "put", "post", "patch", "delete", "head", "options", "trace"]

    /// "GET /v1/jobs/{id}" for every operation of the embedded document.
    static func documented() throws -> Set<String> {
        let doc = try #require(try Yams.load(yaml: OpenAPIDocument.yaml) as? [String: Any])
        let paths = try #require(doc["paths"] as? [String: Any])
        var out = Set<String>()
        for (path, item) in paths {
            let operations = try #require(item as? [String: Any], "\(path)")
            for method in operations.keys where methods.contains(method) {
                out.insert("\(method.uppercased()) \(path)")
            }
        }
        return out
    }

    /// "GET /v1/jobs/{id}" for every operation the router registers, and apart the routes that only answer 405 on
    /// a Salesforce-compatible resource (a method the resource does not take). HEAD beside GET is the GET operation.
    static func served() -> (operations: Set<String>, refused: Set<String>) {
        let connect = Set(
            APIServer.connectResources.flatMap { resource in
                resource.operations.map {
                    "\($0.method.rawValue.uppercased()) /services/data/{version}"
                        + ObservingMiddleware.template(resource.path)
                }
            })
        var operations = Set<String>()
        var refused = Set<String>()
        for route in InMemoryAPI().server.router().routes {
            let path = ObservingMiddleware.template(route.path.description)
            let entry = "\(route.method.rawValue.uppercased()) \(path)"
            if route.method == .head && connect.contains("GET \(path)") { continue }
            if path.hasPrefix("/services/data/") && !connect.contains(entry) {
                refused.insert(entry)
            } else {
                operations.insert(entry)
            }
        }
        return (operations, refused)
    }

    @Test func documentDescribesEveryRouteAndNoOther() throws {
        let documented = try Self.documented()
        let (served, _) = Self.served()
        #expect(served.subtracting(documented).sorted() == [], "routes missing from openapi/volley.yaml")
        #expect(documented.subtracting(served).sorted() == [], "operations the server does not route")
    }

    /// Each Salesforce-compatible path answers every method: its operations, HEAD with GET, and 405 for the rest.
    @Test func everySalesforcePathAnswersEveryMethod() throws {
        let (served, refused) = Self.served()
        var methods: [String: Set<String>] = [:]
        for entry in served.union(refused) where entry.contains(" /services/data/") {
            let parts = entry.split(separator: " ", maxSplits: 1)
            methods[String(parts[1]), default: []].insert(String(parts[0]))
        }
        // Below the version, a path no resource has answers Salesforce's 404, whatever the method.
        #expect(
            methods.removeValue(forKey: "/services/data/{version}/**") == [
                "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
            ])
        #expect(methods.count == APIServer.connectResources.count)
        for (path, taken) in methods {
            let all = taken.contains("GET") ? taken.union(["HEAD"]) : taken
            #expect(all == ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"], "\(path): \(taken.sorted())")
        }
    }

    @Test func theVersionSegmentIsVAndTwoNumbers() {
        #expect(ConnectVersionMiddleware.isVersion("v58.0") && ConnectVersionMiddleware.isVersion("v46.10"))
        for bad in ["v5x.0", "v58", "58.0", "v.0", "v58.", "v58.0.1", ""] {
            #expect(!ConnectVersionMiddleware.isVersion(bad), "\(bad)")
        }
    }

    @Test func everyOperationHasAnIdCredentialAndErrorAnswers() throws {
        let doc = try #require(try Yams.load(yaml: OpenAPIDocument.yaml) as? [String: Any])
        let paths = try #require(doc["paths"] as? [String: Any])
        let schemes = Set(
            try #require((doc["components"] as? [String: Any])?["securitySchemes"] as? [String: Any]).keys)
        #expect(schemes == ["apiKey", "userToken"])
        var ids = Set<String>()
        for (path, item) in paths {
            for (method, value) in try #require(item as? [String: Any]) where Self.methods.contains(method) {
                let op = try #require(value as? [String: Any])
                let id = try #require(op["operationId"] as? String, "\(method) \(path)")
                #expect(ids.insert(id).inserted, "operationId \(id) repeats")
                let responses = try #require(op["responses"] as? [String: Any])
                let security = op["security"] as? [[String: Any]]
                if security?.isEmpty == true { continue } // the health resources and this document
                for requirement in security ?? [] { #expect(schemes.isSuperset(of: requirement.keys), "\(id)") }
                #expect(responses["401"] != nil, "\(id) does not describe 401")
                #expect(responses["429"] != nil, "\(id) does not describe 429")
            }
        }
    }
}
