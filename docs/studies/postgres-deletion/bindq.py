# minimal PG v3 extended-protocol client over unix socket (trust auth): sends SQL with $1 as a bind parameter
import socket, struct, sys
sock_dir, port, user, db, sql, param = sys.argv[1:7]
s = socket.socket(socket.AF_UNIX); s.connect(f"{sock_dir}/.s.PGSQL.{port}")
def msg(t, body): return t + struct.pack("!I", len(body)+4) + body
cs = lambda x: x.encode()+b"\0"
body = struct.pack("!I", 196608) + cs("user")+cs(user)+cs("database")+cs(db)+b"\0"
s.sendall(struct.pack("!I", len(body)+4)+body)
def read_until(tag):
    buf=b""; out=[]
    while True:
        while len(buf) < 5 or len(buf) < 1+struct.unpack("!I", buf[1:5])[0]:
            d=s.recv(65536)
            if not d: return out
            buf+=d
        t=buf[:1]; n=struct.unpack("!I", buf[1:5])[0]; payload=buf[5:1+n]; buf=buf[1+n:]
        out.append((t,payload))
        if t==b"E": print("ERROR:", payload.replace(b"\0", b" ").decode(errors="replace"))
        if t==tag: return out
read_until(b"Z")
p=param.encode()
s.sendall(msg(b"P", cs("")+cs(sql)+struct.pack("!H",0)) +
          msg(b"B", cs("")+cs("")+struct.pack("!H",0)+struct.pack("!H",1)+struct.pack("!I",len(p))+p+struct.pack("!H",0)) +
          msg(b"E", cs("")+struct.pack("!I",0)) + msg(b"S", b""))
read_until(b"Z")
s.sendall(msg(b"X", b""))
