import Testing
import TetherCore

@testable import TetherHTTP

struct HTTPTransportMachineTests {
    typealias Machine = HTTPTransportMachine
    typealias Action = HTTPTransportMachine.Action
    typealias Request = HTTPTransportMachine.Request

    static let url = "http://127.0.0.1:8080/hub?id=token"

    static func drain(_ machine: inout Machine) -> [Action] {
        var actions: [Action] = []
        while let action = machine.pollAction() { actions.append(action) }
        return actions
    }

    static func requests(_ actions: [Action]) -> [Request] {
        actions.compactMap {
            if case .request(let request) = $0 { return request }
            return nil
        }
    }

    static func frames(_ text: String) -> [UInt8] { Array(text.utf8) }

    // MARK: - Long polling

    @Test func longPollingIsOpenAtOnceAndPollsAfterTheHandshakeIsAnswered() throws {
        var machine = Machine(kind: .longPolling, url: Self.url, headers: ["Authorization": "Bearer t"], format: .text)
        machine.open()
        #expect(Self.drain(&machine) == [.opened])
        machine.send(Self.frames("{\"protocol\":\"json\",\"version\":1}\u{1E}"))
        let post = try #require(Self.requests(Self.drain(&machine)).first)
        #expect(post.method == .post && post.purpose == .send && post.url == Self.url)
        #expect(post.headers["Authorization"] == "Bearer t")
        #expect(post.headers["Content-Type"] == "text/plain; charset=UTF-8")
        // No poll before the handshake's POST is answered (aiosignalr drops such a connection).
        machine.responseStarted(id: post.id, status: 200)
        #expect(Self.drain(&machine).isEmpty)
        machine.responseEnded(id: post.id)
        let poll = try #require(Self.requests(Self.drain(&machine)).first)
        #expect(poll.method == .get && poll.purpose == .poll && poll.body.isEmpty)
        #expect(poll.headers["Authorization"] == "Bearer t")
    }

    /// An open long-polling transport whose first poll is out: the machine and that poll's id.
    static func polling(format: MessageFormat = .text) -> (Machine, Int) {
        var machine = Machine(kind: .longPolling, url: url, format: format)
        machine.open()
        machine.send(frames("{}\u{1E}"))
        let post = requests(drain(&machine))[0]
        machine.responseStarted(id: post.id, status: 200)
        machine.responseEnded(id: post.id)
        let poll = requests(drain(&machine))[0]
        return (machine, poll.id)
    }

    @Test func eachPollAnswerIsDeliveredAndFollowedByTheNextPoll() throws {
        var (machine, poll) = Self.polling()
        machine.responseStarted(id: poll, status: 200)
        machine.responseBody(id: poll, Self.frames("{}\u{1E}"))
        machine.responseBody(id: poll, Self.frames("{\"type\":6}\u{1E}"))
        machine.responseEnded(id: poll)
        let actions = Self.drain(&machine)
        #expect(actions.count == 3)
        #expect(actions[0] == .received(Self.frames("{}\u{1E}")))
        #expect(actions[1] == .received(Self.frames("{\"type\":6}\u{1E}")))
        let next = try #require(Self.requests(actions).first)
        #expect(next.purpose == .poll && next.id != poll)
        // An empty 200 (the server's poll timeout) and a client-side timeout: poll again.
        machine.responseStarted(id: next.id, status: 200)
        machine.responseEnded(id: next.id)
        let third = try #require(Self.requests(Self.drain(&machine)).first)
        machine.requestFailed(id: third.id, .timedOut)
        #expect(Self.requests(Self.drain(&machine)).first?.purpose == .poll)
        #expect(!machine.isClosed)
    }

    /// A poll's body, however it arrives, is handed over byte for byte (the hub protocol's parser
    /// takes frames split anywhere).
    @Test func aPollBodySplitAtEveryByteArrivesWhole() {
        let body = Self.frames("{\"type\":1,\"target\":\"Notify\",\"arguments\":[\"x\"]}\u{1E}{\"type\":6}\u{1E}")
        for cut in 0...body.count {
            var (machine, poll) = Self.polling()
            machine.responseStarted(id: poll, status: 200)
            machine.responseBody(id: poll, Array(body[..<cut]))
            machine.responseBody(id: poll, Array(body[cut...]))
            machine.responseEnded(id: poll)
            let actions = Self.drain(&machine)
            let received = actions.flatMap { action -> [UInt8] in
                if case .received(let bytes) = action { return bytes }
                return []
            }
            #expect(received == body, "cut at \(cut)")
            #expect(Self.requests(actions).map(\.purpose) == [.poll])
        }
    }

    @Test func aPollAnswered204ClosesInOrderAnd404WithAnError() {
        var (machine, poll) = Self.polling()
        machine.responseStarted(id: poll, status: 204)
        machine.responseEnded(id: poll)
        #expect(Self.drain(&machine) == [.closed(nil)])
        #expect(machine.isClosed)

        var (gone, goneID) = Self.polling(format: .binary)
        gone.responseStarted(id: goneID, status: 404)
        let actions = Self.drain(&gone)
        #expect(
            actions.last
                == .closed(TransportError(.rejected, "The long-polling connection is gone (poll answered 404)."))
        )
        // A late answer to the old poll changes nothing.
        gone.responseBody(id: goneID, [1, 2, 3])
        gone.responseEnded(id: goneID)
        #expect(Self.drain(&gone).isEmpty)
    }

    @Test func sendsNeverOverlapAndGoInOrder() throws {
        var (machine, _) = Self.polling(format: .binary)
        machine.send([1, 0x61])
        let first = try #require(Self.requests(Self.drain(&machine)).first)
        #expect(first.body == [1, 0x61] && first.headers["Content-Type"] == "application/octet-stream")
        machine.send([1, 0x62])
        machine.send([1, 0x63])
        // Nothing while the first POST is out.
        #expect(Self.drain(&machine).isEmpty)
        machine.responseStarted(id: first.id, status: 200)
        machine.responseEnded(id: first.id)
        let second = try #require(Self.requests(Self.drain(&machine)).first)
        #expect(second.body == [1, 0x62, 1, 0x63])
    }

    @Test func aPostCarriesAtMostTheMaximumSizeUnlessOneFrameIsLarger() throws {
        var machine = Machine(kind: .longPolling, url: Self.url, format: .binary, maximumPostSize: 4)
        machine.open()
        machine.send([1, 2])
        let first = try #require(Self.requests(Self.drain(&machine)).first)
        machine.send([3, 4])
        machine.send([5, 6])
        machine.send([7, 8, 9, 10, 11])
        machine.responseStarted(id: first.id, status: 200)
        machine.responseEnded(id: first.id)
        let sends = Self.requests(Self.drain(&machine)).filter { $0.purpose == .send }
        #expect(sends.map(\.body) == [[3, 4, 5, 6]])
        machine.responseStarted(id: sends[0].id, status: 200)
        machine.responseEnded(id: sends[0].id)
        #expect(Self.requests(Self.drain(&machine)).filter { $0.purpose == .send }.map(\.body) == [[7, 8, 9, 10, 11]])
    }

    @Test func aFailedSendClosesTheTransportWithTheStatus() {
        var (machine, poll) = Self.polling()
        machine.send(Self.frames("{\"type\":6}\u{1E}"))
        let post = Self.requests(Self.drain(&machine))[0]
        machine.responseStarted(id: post.id, status: 404)
        let actions = Self.drain(&machine)
        #expect(actions.contains(.cancelRequest(id: poll)))
        #expect(
            actions.last
                == .closed(
                    TransportError(
                        .rejected,
                        "Sending to the server failed with status 404 (the connection is gone)."
                    )
                )
        )
    }

    @Test func stopCancelsThePollAndSendsDelete() throws {
        var (machine, poll) = Self.polling()
        machine.stop()
        let actions = Self.drain(&machine)
        #expect(actions.first == .cancelRequest(id: poll))
        let delete = try #require(Self.requests(actions).first)
        #expect(delete.method == .delete && delete.purpose == .close && delete.url == Self.url)
        #expect(!machine.isClosed)
        // The canceled poll's late answer is ignored; the DELETE's answer closes.
        machine.responseStarted(id: poll, status: 200)
        machine.responseBody(id: poll, Self.frames("{}\u{1E}"))
        machine.responseEnded(id: poll)
        #expect(Self.drain(&machine).isEmpty)
        machine.responseStarted(id: delete.id, status: 202)
        machine.responseEnded(id: delete.id)
        #expect(Self.drain(&machine) == [.closed(nil)])
        machine.send(Self.frames("{}\u{1E}"))
        machine.stop()
        #expect(Self.drain(&machine).isEmpty)
    }

    @Test func aFailedDeleteStillCloses() throws {
        var (machine, _) = Self.polling()
        machine.stop()
        let delete = try #require(Self.requests(Self.drain(&machine)).first)
        machine.requestFailed(id: delete.id, .failed("connection refused"))
        #expect(Self.drain(&machine) == [.closed(nil)])
    }

    // MARK: - Server-Sent Events

    static func openEventStream() -> (Machine, Int) {
        var machine = Machine(kind: .serverSentEvents, url: url, format: .text)
        machine.open()
        let stream = requests(drain(&machine))[0]
        machine.responseStarted(id: stream.id, status: 200, contentType: "text/event-stream; charset=utf-8")
        _ = drain(&machine)
        return (machine, stream.id)
    }

    @Test func theEventStreamOpensOnA200EventStreamResponse() throws {
        var machine = Machine(kind: .serverSentEvents, url: Self.url, headers: ["X-App": "1"], format: .text)
        machine.open()
        let stream = try #require(Self.requests(Self.drain(&machine)).first)
        #expect(stream.method == .get && stream.purpose == .eventStream)
        #expect(stream.headers == ["X-App": "1", "Accept": "text/event-stream"])
        // A send before the stream is open waits for it.
        machine.send(Self.frames("{\"protocol\":\"json\",\"version\":1}\u{1E}"))
        #expect(Self.drain(&machine).isEmpty)
        machine.responseStarted(id: stream.id, status: 200, contentType: " Text/Event-Stream ")
        let actions = Self.drain(&machine)
        #expect(actions.first == .opened)
        #expect(Self.requests(actions).map(\.purpose) == [.send])
    }

    @Test func theEventStreamRefusesAnotherStatusOrContentType() {
        for (status, contentType, kind, message) in [
            (
                403, "text/event-stream", TransportError.Kind.rejected,
                "The Server-Sent Events request failed with status 403."
            ),
            (200, "text/html", .protocolViolation, "The Server-Sent Events response is not text/event-stream."),
            (200, nil, .protocolViolation, "The Server-Sent Events response is not text/event-stream."),
        ] {
            var machine = Machine(kind: .serverSentEvents, url: Self.url, format: .text)
            machine.open()
            let stream = Self.requests(Self.drain(&machine))[0]
            machine.responseStarted(id: stream.id, status: status, contentType: contentType)
            let actions = Self.drain(&machine)
            #expect(actions.contains(.cancelRequest(id: stream.id)))
            #expect(actions.last == .closed(TransportError(kind, message)))
        }
    }

    @Test func eventsSplitAnywhereDeliverTheirFrames() {
        let body = Self.frames(
            "data: {}\u{1E}\r\n\r\n: keep-alive\r\n\r\ndata: {\"type\":6}\u{1E}{\"type\":6}\u{1E}\r\n\r\n"
        )
        for cut in 0...body.count {
            var (machine, stream) = Self.openEventStream()
            machine.responseBody(id: stream, Array(body[..<cut]))
            machine.responseBody(id: stream, Array(body[cut...]))
            #expect(
                Self.drain(&machine) == [
                    .received(Self.frames("{}\u{1E}")), .received(Self.frames("{\"type\":6}\u{1E}{\"type\":6}\u{1E}")),
                ],
                "cut at \(cut)"
            )
        }
    }

    @Test func theEventStreamsEndClosesAndAnOversizedEventFails() {
        var (machine, stream) = Self.openEventStream()
        machine.responseEnded(id: stream)
        #expect(Self.drain(&machine) == [.closed(nil)])

        var small = Machine(kind: .serverSentEvents, url: Self.url, format: .text, maximumEventSize: 8)
        small.open()
        let id = Self.requests(Self.drain(&small))[0].id
        small.responseStarted(id: id, status: 200, contentType: "text/event-stream")
        _ = Self.drain(&small)
        small.responseBody(id: id, Self.frames("data: 0123456789\n\n"))
        let actions = Self.drain(&small)
        #expect(actions.contains(.cancelRequest(id: id)))
        #expect(
            actions.last
                == .closed(
                    TransportError(.protocolViolation, "The Server-Sent Event exceeds the maximum size of 8 bytes.")
                )
        )
    }

    @Test func stoppingTheEventStreamClosesAtOnceWithoutDelete() {
        var (machine, stream) = Self.openEventStream()
        machine.stop()
        let actions = Self.drain(&machine)
        #expect(actions == [.cancelRequest(id: stream), .closed(nil)])
    }

    @Test func a401IsReportedAsUnauthorized() {
        var (machine, stream) = Self.openEventStream()
        machine.send(Self.frames("{}\u{1E}"))
        let post = Self.requests(Self.drain(&machine))[0]
        machine.responseStarted(id: post.id, status: 401)
        let actions = Self.drain(&machine)
        #expect(actions.contains(.cancelRequest(id: stream)))
        #expect(actions.last == .closed(TransportError(.unauthorized, "The server answered 401 (unauthorized).")))

        var polling = Machine(kind: .longPolling, url: Self.url, format: .text)
        polling.open()
        polling.send(Self.frames("{}\u{1E}"))
        let handshake = Self.requests(Self.drain(&polling))[0]
        polling.responseStarted(id: handshake.id, status: 401)
        #expect(
            Self.drain(&polling).last
                == .closed(TransportError(.unauthorized, "The server answered 401 (unauthorized)."))
        )
    }
}
