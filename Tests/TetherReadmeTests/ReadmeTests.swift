import Dispatch
import Foundation
import Synchronization
import Testing
import TetherCore
import TetherDispatch
import TetherSignalR
import TetherSignalRClient
import TetherTestServers
import TetherXMPP
import TetherXMPPClient

/// The package's root directory (from this file's path).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The README's Swift blocks are the files in `Examples/`, in this order, byte for byte: the
/// build compiles them, so a README example that does not compile fails the build, and one that
/// drifts from its compiled copy fails this test.
@Suite struct ReadmeBlockTests {
    static let examples = ["ChatConnection.swift", "SaasHub.swift", "OwnTransport.swift"]

    /// The text of every fenced ```swift block of `markdown`, in order.
    static func swiftBlocks(_ markdown: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil {
                if line == "```swift" { current = [] }
            } else if line == "```" {
                blocks.append(current!.joined(separator: "\n") + "\n")
                current = nil
            } else {
                current!.append(line)
            }
        }
        return blocks
    }

    @Test func everySwiftBlockOfTheReadmeIsACompiledExample() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let blocks = Self.swiftBlocks(readme)
        #expect(
            blocks.count == Self.examples.count,
            "the README has \(blocks.count) Swift blocks; Tests/TetherReadmeTests/Examples has \(Self.examples.count)"
        )
        for (index, (block, name)) in zip(blocks, Self.examples).enumerated() {
            let path = "Tests/TetherReadmeTests/Examples/\(name)"
            let file = try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
            guard block != file else { continue }
            let blockLines = block.split(separator: "\n", omittingEmptySubsequences: false)
            let fileLines = file.split(separator: "\n", omittingEmptySubsequences: false)
            let line =
                zip(blockLines, fileLines).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                ?? min(blockLines.count, fileLines.count)
            Issue.record(
                """
                README Swift block \(index + 1) differs from \(path) at line \(line + 1):
                README: \(line < blockLines.count ? String(blockLines[line]) : "(end)")
                file:   \(line < fileLines.count ? String(fileLines[line]) : "(end)")
                """
            )
        }
    }

    @Test func theBlockReaderFindsFencedSwiftOnly() {
        let markdown = "text\n```swift\nlet a = 1\n\nlet b = 2\n```\n```sh\nls\n```\n```swift\nx\n```\n"
        #expect(Self.swiftBlocks(markdown) == ["let a = 1\n\nlet b = 2\n", "x\n"])
    }
}

/// The README's two client examples, run as written against the real servers. They share the
/// examples' `ui`, so they run one at a time.
@Suite(.serialized, .timeLimit(.minutes(2)), .realServers(.prosody, .aiosignalr, .opensslCommand))
struct ReadmeExampleTests {
    /// `ChatConnection` logs in over STARTTLS, sends and receives, survives a cut link, and says
    /// "wrong password" for a wrong one.
    @Test func theXMPPExampleLogsInTalksAndSurvivesACut() async throws {
        ui.clear()
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates)
        try await server.start()
        let relay = try TCPRelay(upstreamPort: server.port)
        let chat = try ChatConnection(
            jid: JID("alice@localhost/phone")!,
            password: Secret("alicepass"),
            server: Endpoint(host: "127.0.0.1", port: relay.port),
            options: .init(caFile: certificates.caCertificate)
        )
        await chat.logIn()
        #expect(await eventually { ui.shown.contains("online as alice@localhost/phone") }, "\(ui.shown)")
        #expect(await eventually { ui.shown.contains("0 contacts") }, "\(ui.shown)")

        // Bob, a plain client, hears Alice and answers her.
        var bobConfiguration = XMPPClient.Configuration(
            jid: JID("bob@localhost/desk")!,
            password: Secret("bobpass"),
            endpoint: Endpoint(host: "127.0.0.1", port: server.port)
        )
        bobConfiguration.fetchRosterOnConnect = false
        let bob = try XMPPClient(configuration: bobConfiguration, options: .init(caFile: certificates.caCertificate))
        let bobBodies = Mutex<[String]>([])
        bob.setEventHandler(queue: DispatchQueue(label: "bob")) { event in
            if case .message(let message) = event, let body = message.body { bobBodies.withLock { $0.append(body) } }
        }
        try await bob.connect()
        try await chat.send("hello bob", to: JID("bob@localhost/desk")!)
        #expect(await eventually { bobBodies.withLock { $0 } == ["hello bob"] })
        try await bob.send(XMPPMessage(to: JID("alice@localhost/phone"), body: "hi alice"))
        #expect(await eventually { ui.shown.contains("bob@localhost/desk: hi alice") }, "\(ui.shown)")

        // A cut link: offline, then resumed with nothing lost.
        ui.clear()
        relay.cutAll()
        #expect(await eventually { ui.shown.contains { $0.hasPrefix("offline: ") } }, "\(ui.shown)")
        #expect(await eventually { ui.shown.contains("online") }, "\(ui.shown)")
        try await chat.send("still here", to: JID("bob@localhost/desk")!)
        #expect(await eventually { bobBodies.withLock { $0 } == ["hello bob", "still here"] })
        await chat.client.disconnect()
        await bob.disconnect()

        ui.clear()
        let wrong = try ChatConnection(
            jid: JID("alice@localhost/phone")!,
            password: Secret("not her password"),
            server: Endpoint(host: "127.0.0.1", port: server.port),
            options: .init(caFile: certificates.caCertificate)
        )
        await wrong.logIn()
        #expect(await eventually { ui.shown.contains("wrong password") }, "\(ui.shown)")
    }

    /// `SaasHub` connects, joins its group with `{"PlatUserId": …}`, receives `ReciveSaasMessage`
    /// with a `ParamData` pushed to that group, joins again after a server restart, and reports a
    /// refused join as such (not as a failed connect).
    @Test func theSignalRExampleJoinsItsGroupAndReceives() async throws {
        ui.clear()
        let server = try SignalRHubServer()
        try await server.start()
        let received = Mutex<[String]>([])
        let observer = NotificationCenter.default.addObserver(forName: .saasMessage, object: nil, queue: nil) {
            note in
            if let text = note.object as? String { received.withLock { $0.append(text) } }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let tokens = Mutex(0)
        let hub = try SaasHub(url: server.url, userId: 32323) {
            tokens.withLock { $0 += 1 }
            return "token"
        }
        await hub.open()
        #expect(ui.shown == ["online"])

        // The backend pushes to the user's group (from another connection), and only there.
        let backend = try HubConnectionBuilder(url: server.url).build()
        try await backend.start()
        let message = ParamData(id: 1, userId: 32323, niceName: "Ana", jsonData: #"{"order":7}"#)
        try await backend.invoke("PushSaasMessage", 32323, message)
        try await backend.invoke("PushSaasMessage", 1, ParamData(id: 2, userId: 1, niceName: "B", jsonData: "{}"))
        #expect(await eventually { received.withLock { $0 } == [#"{"order":7}"#] })

        // The server restarts: the example reconnects and joins its group again.
        await backend.stop()
        server.stop()
        #expect(await eventually { ui.shown.contains { $0.hasPrefix("reconnecting: ") } }, "\(ui.shown)")
        try await server.start()
        #expect(await eventually { ui.shown.filter { $0 == "online" }.count == 2 }, "\(ui.shown)")
        let backendAgain = try HubConnectionBuilder(url: server.url).build()
        try await backendAgain.start()
        // The join runs after the reconnected callback: push until it has landed.
        let second = ParamData(id: 3, userId: 32323, niceName: "Ana", jsonData: #"{"order":8}"#)
        #expect(
            await eventually {
                received.withLock { $0.contains(#"{"order":8}"#) }
            } pushing: {
                try? await backendAgain.invoke("PushSaasMessage", 32323, second)
            }
        )
        #expect(tokens.withLock { $0 } >= 2)
        await hub.connection.stop()
        #expect(await eventually { ui.shown.last == "closed: by the app" }, "\(ui.shown)")

        // A refused join is reported as such; the connection itself is up.
        ui.clear()
        let stranger = try SaasHub(url: server.url, userId: -1) { nil }
        await stranger.open()
        #expect(ui.shown.first == "online")
        #expect(ui.shown.last == "the hub refused the group: No such user: -1", "\(ui.shown)")
        #expect(await stranger.connection.state() == .connected)
        await stranger.connection.stop()
        await backendAgain.stop()
    }

    /// `echoAll` gets every echo back, in order, over each transport.
    @Test(arguments: HubTransport.allCases)
    func theExecutorExampleEchoesEveryLine(over transport: HubTransport) async throws {
        let server = try SignalRHubServer()
        try await server.start()
        defer { server.stop() }
        let connection = try HubConnectionBuilder(url: server.url).withTransports(transport).build()
        try await connection.start()
        let lines = (1...20).map { "line \($0) ✓" }
        #expect(try await echoAll(lines, on: connection) == lines)
        await connection.stop()
    }
}

/// Like `eventually`, running `action` before every check (every 100 ms).
func eventually(
    timeout: Duration = .seconds(15),
    _ condition: () -> Bool,
    pushing action: () async -> Void
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        await action()
        if await eventually(timeout: .milliseconds(100), condition) { return true }
    }
    return condition()
}
