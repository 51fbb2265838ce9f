import Foundation
import Logging
import Testing
import VolleyConnect
import VolleyCore
import VolleyTestDoubles
import Yams

@testable import VolleyAPI

/// The served document describes exactly the routes the server has: every (method, path) the router registers,
/// with the Salesforce-compatible resources taken from the table `ConnectService` routes by.
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

    /// "GET /v1/jobs/{id}" for every route the server answers (HEAD counts only where it is registered alone).
    static func served() -> (routes: Set<String>, connectMethods: Set<String>) {
        let server = InMemoryAPI().server
        var routes = Set<String>()
        var connectMethods = Set<String>()
        for route in server.router().routes {
            let path = ObservingMiddleware.template(route.path.description)
            let method = route.method.rawValue.uppercased()
            if path.hasPrefix("/services/data/") {
                #expect(path == "/services/data/{version}/**")
                connectMethods.insert(method)
            } else {
                routes.insert("\(method) \(path)")
            }
        }
        for resource in ConnectService.resources {
            for method in resource.methods { routes.insert("\(method) /services/data/{version}\(resource.path)") }
        }
        return (routes, connectMethods)
    }

    @Test func documentDescribesEveryRouteAndNoOther() throws {
        let documented = try Self.documented()
        let (served, connectMethods) = Self.served()
        #expect(served.subtracting(documented).sorted() == [], "routes missing from openapi/volley.yaml")
        #expect(documented.subtracting(served).sorted() == [], "operations the server does not route")
        // The one wildcard route hands these methods to ConnectService, whose table the loop above read.
        #expect(connectMethods == ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"])
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
