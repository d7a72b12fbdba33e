import TetherSignalRClient

/// Sends each line and awaits the hub's echo, from a task on the connection's executor: each
/// answer resumes the loop on the thread that read it, with no thread hand-off between calls.
func echoAll(_ lines: [String], on connection: HubConnection) async throws -> [String] {
    try await withTaskExecutorPreference(connection.executor) {  // XMPPClient has one too
        var echoed: [String] = []
        for line in lines { echoed.append(try await connection.invoke("Echo", line)) }
        return echoed
    }
}
