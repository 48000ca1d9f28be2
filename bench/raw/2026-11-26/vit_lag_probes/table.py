#!/usr/bin/python3
"""per-epoch train loss / test accuracy of the ViT runs, side by side"""
import re, sys, os
R='/work/runs/vit/'
runs=[('dp 5e-4','dp-E25/log.txt'),('v1 5e-4','cdp-v1-E25/log.txt'),
      ('v1 5e-4 b.8','killed-cdp-v1-E25-b0.8-lr5e-4/log.txt'),
      ('v1 2.5e-4','cdp-v1-E25-b0.9,0.999-lr2.5e-4/log.txt'),
      ('dp 2.5e-4','dp-E25-b0.9,0.999-lr2.5e-4/log.txt'),
      ('v2 2.5e-4','cdp-v2-E25-b0.9,0.999-lr2.5e-4/log.txt'),
      ('v1 5e-4 b2.98','killed-cdp-v1-E25-b0.98-lr5e-4/log.txt'),
      ('v1 E40 5e-4','cdp-v1-E40-b0.9,0.999-lr5e-4/log.txt'),
      ('dp E40 5e-4','dp-E40-b0.9,0.999-lr5e-4/log.txt'),
      ('v2 E40 5e-4','cdp-v2-E40-b0.9,0.999-lr5e-4/log.txt')]
data={}
for name,p in runs:
    p=R+p
    if not os.path.exists(p): continue
    rows={}
    for l in open(p):
        m=re.match(r'epoch +(\d+)/\d+ .*train ([0-9.]+)/([0-9.]+)%  test ([0-9.]+)/([0-9.]+)%', l)
        if m: rows[int(m.group(1))]=(float(m.group(2)),float(m.group(5)))
    data[name]=rows
names=list(data)
print('ep  '+'  '.join('%-16s'%n for n in names))
for e in range(1,41):
    print('%2d  '%e+'  '.join(('%.4f/%5.2f%%   '%data[n][e]) if e in data[n] else ' '*16 for n in names))
