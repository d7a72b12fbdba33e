import Testing
import TetherCore

@testable import TetherSignalR

struct HandshakeVectorTests {
    struct Request: Decodable {
        var input: String
        var `protocol`: String?
        var version: Int?
        var error: String?
    }
    struct Response: Decodable {
        var input: String
        var error: String?
        var minorVersion: Int?
        var messages: [String]?
    }
    struct File: Decodable {
        var requests: [Request]
        var responses: [Response]
        var requestIncomplete: [Request]
        var requestErrors: [Request]
        var responseErrors: [Response]
        var responseThenMessages: [Response]
    }

    static let file: File = try! loadVector("handshake.json")

    @Test func parsesRequests() throws {
        for vector in Self.file.requests {
            let bytes = Array(vector.input.utf8) + Array("{}".utf8)
            let parsed = try #require(try HandshakeRequest.parse(bytes.span))
            #expect(parsed.request == HandshakeRequest(protocolName: vector.protocol!, version: vector.version!))
            #expect(parsed.consumed == vector.input.utf8.count)
            // Every strict prefix waits for more data.
            for length in 0..<vector.input.utf8.count {
                #expect(try HandshakeRequest.parse(bytes.span.extracting(0..<length)) == nil)
            }
        }
        for vector in Self.file.requestIncomplete {
            #expect(try HandshakeRequest.parse(Array(vector.input.utf8).span) == nil)
        }
    }

    @Test func writesRequestsAsTheTypeScriptClientDoes() {
        var bytes: [UInt8] = []
        HandshakeRequest(protocolName: "json", version: 1).write(into: &bytes)
        HandshakeRequest(protocolName: "messagepack", version: 2).write(into: &bytes)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "{\"protocol\":\"json\",\"version\":1}\u{1E}{\"protocol\":\"messagepack\",\"version\":2}\u{1E}"
        )
    }

    @Test func rejectsRequestsWithExactText() {
        for vector in Self.file.requestErrors {
            #expect(throws: HubProtocolError(.invalidHandshake, vector.error!), "\(vector.input)") {
                try HandshakeRequest.parse(Array(vector.input.utf8).span)
            }
        }
    }

    @Test func parsesResponses() throws {
        for vector in Self.file.responses {
            let parsed = try #require(try HandshakeResponse.parse(Array(vector.input.utf8).span))
            #expect(parsed.response == HandshakeResponse(error: vector.error, minorVersion: vector.minorVersion))
            var written: [UInt8] = []
            parsed.response.write(into: &written)
            #expect(try HandshakeResponse.parse(written.span)?.response == parsed.response)
        }
        for vector in Self.file.responseErrors {
            #expect(throws: HubProtocolError(.invalidHandshake, vector.error!), "\(vector.input)") {
                try HandshakeResponse.parse(Array(vector.input.utf8).span)
            }
        }
    }

    @Test func bytesAfterTheResponseAreHubMessages() throws {
        for vector in Self.file.responseThenMessages {
            let bytes = Array(vector.input.utf8)
            let parsed = try #require(try HandshakeResponse.parse(bytes.span))
            #expect(parsed.response.error == nil)
            let rest = Array(bytes[parsed.consumed...])
            let result = decodeAll(JSONHubProtocol().makeParser(), rest, .byteByByte)
            #expect(try result.messages.map(CanonicalJSON.render) == vector.messages)
        }
    }
}

struct NegotiateVectorTests {
    struct Success: Decodable {
        var body: String
        var connectionId: String
        var connectionToken: String
        var negotiateVersion: Int
        var transports: [String]
        var useStatefulReconnect: Bool
    }
    struct Redirect: Decodable {
        var body: String
        var url: String
        var accessToken: String?
    }
    struct Failure: Decodable {
        var body: String
        var kind: String
        var error: String
    }
    struct URLCase: Decodable {
        var url: String
        var stateful: Bool
        var negotiate: String
        var token: String
        var connect: String
        var webSocket: String
    }
    struct File: Decodable {
        var responses: [Success]
        var redirects: [Redirect]
        var errors: [Failure]
        var urls: [URLCase]
    }

    static let file: File = try! loadVector("negotiate.json")

    @Test func parsesResponses() throws {
        for vector in Self.file.responses {
            guard case .connect(let response) = try Negotiate.parse(Array(vector.body.utf8)) else {
                Issue.record("not a connect outcome: \(vector.body)")
                continue
            }
            #expect(response.connectionId == vector.connectionId)
            #expect(response.connectionToken == vector.connectionToken)
            #expect(response.negotiateVersion == vector.negotiateVersion)
            #expect(response.availableTransports.map(\.transport) == vector.transports)
            #expect(response.useStatefulReconnect == vector.useStatefulReconnect)
        }
        let first = try Negotiate.parse(Array(Self.file.responses[0].body.utf8))
        let response = try #require(first.connectResponse)
        #expect(response.transport(named: "ServerSentEvents")?.supports(.binary) == false)
        #expect(response.transport(named: "WebSockets")?.supports(.binary) == true)
    }

    @Test func parsesRedirects() throws {
        for vector in Self.file.redirects {
            #expect(
                try Negotiate.parse(Array(vector.body.utf8))
                    == .redirect(url: vector.url, accessToken: vector.accessToken)
            )
        }
    }

    @Test func rejectsWithExactText() {
        for vector in Self.file.errors {
            let kind: HubProtocolError.Kind =
                vector.kind == "negotiateRejected" ? .negotiateRejected : .invalidNegotiateResponse
            #expect(throws: HubProtocolError(kind, vector.error), "\(vector.body)") {
                try Negotiate.parse(Array(vector.body.utf8))
            }
        }
    }

    @Test func buildsURLs() {
        for vector in Self.file.urls {
            #expect(Negotiate.negotiateURL(for: vector.url, statefulReconnect: vector.stateful) == vector.negotiate)
            #expect(Negotiate.connectURL(for: vector.url, connectionToken: vector.token) == vector.connect)
            #expect(Negotiate.webSocketURL(for: vector.connect) == vector.webSocket)
        }
        #expect(Negotiate.connectURL(for: "http://h/hub?a=1", connectionToken: nil) == "http://h/hub?a=1")
        // Schemes match case-insensitively (RFC 3986 §3.1).
        #expect(Negotiate.webSocketURL(for: "HTTPS://Example.com/hub") == "wss://Example.com/hub")
        #expect(Negotiate.webSocketURL(for: "Http://h:5000/hub") == "ws://h:5000/hub")
        #expect(Negotiate.webSocketURL(for: "wss://h/hub") == "wss://h/hub")
        #expect(Negotiate.webSocketURL(for: "httpx://h/hub") == "httpx://h/hub")
    }
}

/// Vector 57: every record of the aiosignalr stateful-reconnect transcript is a valid handshake or
/// hub message of the expected type (the connection machine's tests replay the exchange itself).
struct StatefulReconnectTranscriptTests {
    struct Line: Decodable {
        var ws: Int
        var dir: String
        var record: String
        var duplicate: Bool?
    }
    struct File: Decodable {
        var negotiateQuery: String
        var transcript: [Line]
    }

    @Test func everyRecordParses() throws {
        let file: File = try loadVector("stateful-reconnect.json")
        #expect(
            Negotiate.negotiateURL(for: "http://h/hub", statefulReconnect: true) == "http://h/hub/negotiate?"
                + file.negotiateQuery
        )
        let request = try #require(try HandshakeRequest.parse(Array((file.transcript[0].record + "\u{1E}").utf8).span))
        #expect(request.request == HandshakeRequest(protocolName: "json", version: 2))
        let response = try #require(
            try HandshakeResponse.parse(Array((file.transcript[1].record + "\u{1E}").utf8).span)
        )
        #expect(response.response.error == nil)
        let types = try file.transcript.dropFirst(2).map { try parseJSONRecord($0.record).messageType }
        #expect(types == [1, 1, 3, 3, 8, 9, 9, 3, 3, 1, 3, 8])
        let duplicates = file.transcript.filter { $0.duplicate == true }.map(\.record)
        #expect(duplicates.count == 2)
    }
}

struct NegotiateRedirectURLTests {
    @Test func aRedirectKeepsTheAppsOwnQueryParameters() {
        #expect(
            Negotiate.redirectURL("https://other/chat", keepingQueryOf: "http://h/hub?tenant=a&key=b")
                == "https://other/chat?tenant=a&key=b"
        )
        // The redirect's own parameters win; others are appended after them.
        #expect(
            Negotiate.redirectURL("https://other/chat?tenant=z&x=1", keepingQueryOf: "http://h/hub?tenant=a&key=b")
                == "https://other/chat?tenant=z&x=1&key=b"
        )
        #expect(Negotiate.redirectURL("https://other/chat#f", keepingQueryOf: "http://h/hub") == "https://other/chat#f")
    }
}
