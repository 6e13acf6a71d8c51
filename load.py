import asyncio, sys
sys.path.insert(0, "/work/main/scripts")
import bench_sessions as b
class M:
    peak = 0
    def sample(self): pass
    def cpu_s(self): return 0.0
row = b.Row("xpgym-openenv", 1024)
url = f"ws://127.0.0.1:{sys.argv[1]}/openenv/{b.ENV_ID}/ws"
asyncio.run(b.run_sessions(row, lambda: b.WebSocketSession(url), 5, 0.1, M()))
print(row.steps, row.steps_per_s, row.step_p99_s, row.errors)
