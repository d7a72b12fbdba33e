import Testing
import TetherHTTP

@testable import TetherSignalR

/// SignalR's frames travel in the `data` of Server-Sent Events unchanged.
struct ServerSentEventFramesTests {
    @Test func signalRFramesPassThroughUnchanged() throws {
        let frames = "{\"type\":1,\"target\":\"Send\",\"arguments\":[\"a\\nb\"]}\u{1E}{\"type\":6}\u{1E}"
        var reader = ServerSentEventReader()
        reader.append(Array("data: \(frames)\r\n\r\n".utf8))
        let events = [try #require(try reader.next())]
        var parser = JSONHubProtocol().makeParser()
        let data = try #require(events.first).data
        parser.append(data.span)
        let first = try parser.next()
        let second = try parser.next()
        #expect(first != nil && second == .ping)
    }

}
