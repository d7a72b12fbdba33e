import Dispatch
import Foundation
import Testing
import TetherCore
import TetherDispatch
import TetherTestServers
import TetherXMPP
import TetherXMPPClient

/// Records a client's events (with the time each arrived) and waits for conditions on them.
final class EventRecorder: @unchecked Sendable {
    // `entries` is guarded by `lock`; the handler runs on `queue`.
    private let lock = NSLock()
    private var entries: [(time: UInt64, event: XMPPClient.Event)] = []
    let queue = DispatchQueue(label: "tether.test-events")

    init(_ client: XMPPClient) {
        client.setEventHandler(queue: queue) { [self] event in
            lock.withLock { entries.append((DispatchTime.now().uptimeNanoseconds, event)) }
        }
    }

    var events: [XMPPClient.Event] {
        lock.withLock { entries.map(\.event) }
    }

    /// The events with their arrival times (uptime nanoseconds).
    var timedEvents: [(time: UInt64, event: XMPPClient.Event)] {
        lock.withLock { entries }
    }

    /// The bodies of the messages received, in order.
    var bodies: [String] {
        events.compactMap { if case .message(let message) = $0 { message.body } else { nil } }
    }

    /// Waits until `condition` holds for the events (polling), or `timeout`; true if it held.
    @discardableResult
    func wait(
        timeout: Duration = .seconds(10),
        _ condition: ([XMPPClient.Event]) -> Bool
    ) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(events) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition(events)
    }
}

extension XMPPClient.Event {
    var isConnected: Bool {
        if case .lifecycle(.connected) = self { return true }
        return false
    }
    var isResumed: Bool {
        if case .lifecycle(.resumed) = self { return true }
        return false
    }
    /// A `connectionLost` event.
    var isDisconnected: Bool {
        if case .lifecycle(.connectionLost) = self { return true }
        return false
    }
    /// The error of a `connectionLost` event.
    var disconnectError: XMPPClientError? {
        if case .lifecycle(.connectionLost(let error)) = self { return error }
        return nil
    }
}

/// A client configuration for an account of a test prosody, reached at 127.0.0.1:`port`.
func testConfiguration(
    _ user: String,
    port: Int,
    password: String? = nil,
    resource: String? = nil
) -> XMPPClient.Configuration {
    var configuration = XMPPClient.Configuration(
        jid: JID("\(user)@localhost")!,
        password: Secret(password ?? "\(user)pass"),
        endpoint: Endpoint(host: "127.0.0.1", port: port),
        tls: .disabled,
        resource: resource,
        reconnectPolicy: .fixed(.milliseconds(200), maximumAttempts: 20),
        fetchRosterOnConnect: false
    )
    configuration.connectTimeout = .seconds(10)
    return configuration
}

/// A started prosody, or nil (with a recorded issue) when it cannot run here.
func startedProsody(authentication: String = "internal_plain") async throws -> ProsodyServer {
    let server = try ProsodyServer(authentication: authentication)
    try await server.start()
    return server
}

/// The name of the thread this runs on (a read thread's is "tether.read"), from the kernel.
func currentThreadName() -> String {
    let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
    return name.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Waits until `count()` has not changed for `quiet` (or `timeout` passed), and returns it.
func steadyCount(of count: () -> Int, quiet: Duration = .seconds(1), timeout: Duration = .seconds(30)) async -> Int {
    let deadline = ContinuousClock.now + timeout
    var last = count()
    var since = ContinuousClock.now
    while ContinuousClock.now < deadline {
        try? await Task.sleep(for: .milliseconds(50))
        let now = count()
        if now != last {
            last = now
            since = ContinuousClock.now
        } else if ContinuousClock.now - since >= quiet {
            break
        }
    }
    return last
}

/// Stalls every link of `relay` (nothing passes, nothing closes) and expects the client whose
/// events `events` records to find its link dead by its pings (`interval` 1 s, `timeout` 0.5 s, 2
/// missed: within 2 s of the last byte received) and to resume over a new connection.
func expectStallFoundByPingsAndResumed(_ relay: TCPRelay, _ events: EventRecorder) async throws {
    let stalled = DispatchTime.now().uptimeNanoseconds
    relay.stallAll()
    #expect(await events.wait(timeout: .seconds(10)) { $0.contains { $0.isResumed } })
    let disconnect = try #require(events.timedEvents.first { $0.event.isDisconnected })
    #expect(disconnect.event.disconnectError?.kind == .serverTimeout, "\(disconnect.event)")
    let detection = Duration.nanoseconds(Int64(disconnect.time - stalled))
    // The bound is 1 s + 2 × 0.5 s after the last byte received (before the stall).
    #expect(detection <= .milliseconds(2000 + 300), "detected after \(detection)")
    #expect(detection >= .milliseconds(900), "detected after \(detection)")
    #expect(relay.acceptedCount == 2)
}

/// What the completions of callback calls (`XMPPClient.request(_:timeout:completion:)`,
/// `HubConnection.invoke(_:_:returning:completion:)`) saw: their outcomes in order, and whether
/// each ran inside its call (on the caller's thread before the call returned) or off the read
/// thread.
final class CompletionLog: @unchecked Sendable {
    /// A call under way on the thread that made it, until `set()` (once it returned).
    final class Returned: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        private let caller = pthread_self()
        func set() { lock.withLock { value = true } }
        /// The current thread is the caller's, and the call has not returned.
        var isInsideCall: Bool { lock.withLock { !value } && pthread_equal(caller, pthread_self()) != 0 }
    }

    // Guarded by `lock`.
    private let lock = NSLock()
    private var recorded: [String] = []
    private var early = 0
    private var offThread = 0

    func callStarted() -> Returned { Returned() }

    /// A completion ran (`onReadThread`: on the thread that read its answer).
    func completed(returned: Returned, onReadThread: Bool) {
        let beforeReturning = returned.isInsideCall
        lock.withLock {
            if beforeReturning { early += 1 }
            if !onReadThread { offThread += 1 }
        }
    }

    func record(_ result: Result<String, XMPPClientError>) {
        lock.withLock { recorded.append((try? result.get()) ?? (result.failureKind ?? "")) }
    }

    func record(_ text: String) {
        lock.withLock { recorded.append(text) }
    }

    var outcomes: [String] { lock.withLock { recorded } }
    var completedInsideCall: Int { lock.withLock { early } }
    var offReadThread: Int { lock.withLock { offThread } }
}

extension Result where Failure == XMPPClientError {
    /// The error's kind, by name (nil for a success).
    var failureKind: String? {
        if case .failure(let error) = self { return error.kind.rawValue }
        return nil
    }
}
